// Package azdetect finds the availability zone (AZ) the process runs in.
//
// The shortest use is the process-wide detection, configured from the
// environment and cached for the life of the process:
//
//	res, err := azdetect.Detect(ctx)
//	if err != nil {
//		// Not fatal: errors.Is(err, azdetect.ErrNoAZ); run without a zone.
//	}
//	fmt.Println(res.AZ, res.Source) // "us-east-1a ec2"
//
// The command azkafka detect [--json] shows what a process would detect,
// with each provider's outcome.
//
// # Errors
//
// Errors of the package start with "azdetect:". Every error Detect and
// Redetect return matches ErrNoAZ (errors.Is); a zone that fails Validate
// matches ErrInvalidAZ; each provider's outcome in a Result's report
// matches ErrNotConfigured, ErrNotThisCloud, ErrNoZone or ErrSuperseded
// when it gave no zone. Configuration errors (ConfigFromEnv) name the
// variable and quote its value.
//
// # Sources
//
// An explicit zone — Config.AZ (source "option"), or AZKAFKA_AZ, else
// WARPSTREAM_AVAILABILITY_ZONE, in the environment (source "env") — is used
// as is and nothing touches the network. Without one, these providers run
// in parallel under one budget (Config.Timeout, AZKAFKA_DETECT_TIMEOUT,
// default 1 s):
//
//   - ecs: GET ${ECS_CONTAINER_METADATA_URI_V4}/task, field
//     AvailabilityZone (Fargate platform 1.4 and later, recent ECS agents);
//     runs when ECS_CONTAINER_METADATA_URI_V4 is set.
//   - ec2: IMDSv2, PUT /latest/api/token then GET
//     /latest/meta-data/placement/availability-zone (availability-zone-id
//     for FormatID), through the AWS SDK's feature/ec2/imds with no retries
//     and no IMDSv1 fallback; at AWS_EC2_METADATA_SERVICE_ENDPOINT (default
//     http://169.254.169.254; AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE=IPv6
//     selects http://[fd00:ec2::254]); off with AWS_EC2_METADATA_DISABLED=true.
//   - gcp: GET /computeMetadata/v1/instance/zone with Metadata-Flavor:
//     Google (the answer must carry it too), through
//     cloud.google.com/go/compute/metadata, the projects/<n>/zones/ prefix
//     stripped; at GCE_METADATA_HOST (default 169.254.169.254).
//   - azure: GET /metadata/instance/compute/location and .../compute/zone
//     (api-version 2021-02-01, format text, header Metadata: true), joined
//     as location-zone, e.g. "eastus-1" (the form AKS node labels and
//     WarpStream use); a VM without a zone is "no zone here", never
//     "eastus-"; at AZKAFKA_AZURE_IMDS_ENDPOINT (default
//     http://169.254.169.254).
//   - kubernetes: GET
//     https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT/api/v1/nodes/$NODE_NAME
//     (metadata only) with the service-account bearer token, label
//     topology.kubernetes.io/zone (topology.k8s.aws/zone-id for FormatID);
//     runs when KUBERNETES_SERVICE_HOST and NODE_NAME are set and the token
//     file exists. The token and CA files are AZKAFKA_K8S_TOKEN_FILE and
//     AZKAFKA_K8S_CA_FILE (defaults: token and ca.crt under
//     /var/run/secrets/kubernetes.io/serviceaccount).
//
// The precedence is fixed: option > env > ecs > ec2 > gcp > azure >
// kubernetes; AZKAFKA_DETECT_PROVIDERS (a comma-separated subset of
// env,ecs,ec2,gcp,azure,kubernetes; an unknown name is an error) limits
// which run. The zone is that of the highest-ranked provider that answered
// with a valid zone, taken as soon as every provider ranked above it has
// failed, or else when the budget ends: a higher-ranked provider that
// answers within the budget wins over a faster lower one, and one still
// silent at the end of the budget loses to the answer in hand (its
// ProviderResult says it was cut by the budget). The others are stopped
// once the answer is known. A provider whose prerequisites are absent
// answers "not configured" at once without I/O; a refused connection or a
// 4xx answer means "not this cloud" at once, without retries; an invalid
// zone counts as no answer, so a lower-ranked valid one wins. Off-cloud,
// detection ends at the budget.
//
// # Zone names and zone IDs
//
// AZKAFKA_AZ_FORMAT (Config.Format) is name (default: "us-east-1a", what
// WarpStream uses) or id (the AWS zone ID, "use1-az1": the same physical
// zone in every account, and what MSK puts in broker.rack). With id, ecs
// and azure have no ID to give (Azure IMDS exposes only the subscription's
// logical zone) and gcp returns its zone name.
//
// # Safety
//
// Every zone, explicit or fetched, is trimmed and must match
// ^[a-z0-9-]{1,128}$ (Validate), so it cannot inject ',' or '=' into a
// client ID; anything else fails with an error naming the source and
// quoting the value, and an invalid explicit zone fails detection rather
// than falling back to another source. Response bodies are capped (4 KiB
// for text, 64 KiB for ECS JSON, 256 KiB for the Kubernetes node),
// redirects are not followed, metadata requests never use an HTTP proxy,
// and no goroutine outlives a call to Detect. A malformed variable is an
// error naming it and quoting its value (ConfigFromEnv).
//
// # Caching
//
// Detect and Detector.Detect run the detection once; concurrent first
// callers share it, and later calls return the cached outcome without
// allocating. A failure is cached too, so a process off-cloud pays the
// budget once at start-up; Redetect re-reads the environment and runs a
// new detection, e.g. to improve an answer taken when a higher-ranked
// provider was cut by the budget. The caller's context acts as a shorter
// budget: when it ends first, the answer in hand is returned and cached;
// with none, its error is returned and nothing is cached. New builds a
// Detector with explicit settings and the same once-and-cache behaviour.
//
// # Kubernetes
//
// The kubernetes provider reads the node object, a cluster-scoped
// resource: the pod's service account needs get on nodes, and the pod must
// receive its node's name through the downward API. A 403 from the API
// server is reported as such, with this hint.
//
//	apiVersion: rbac.authorization.k8s.io/v1
//	kind: ClusterRole
//	metadata:
//	  name: azkafka-node-reader
//	rules:
//	  - apiGroups: [""]
//	    resources: ["nodes"]
//	    verbs: ["get"]
//	---
//	apiVersion: rbac.authorization.k8s.io/v1
//	kind: ClusterRoleBinding
//	metadata:
//	  name: azkafka-node-reader
//	roleRef:
//	  apiGroup: rbac.authorization.k8s.io
//	  kind: ClusterRole
//	  name: azkafka-node-reader
//	subjects:
//	  - kind: ServiceAccount
//	    name: my-app            # the pod's service account
//	    namespace: my-namespace
//	---
//	# in the pod template:
//	env:
//	  - name: NODE_NAME
//	    valueFrom:
//	      fieldRef:
//	        fieldPath: spec.nodeName
//
// Where granting get on nodes is not wanted, give the zone in AZKAFKA_AZ
// and no API call is made. On clusters that copy the node's topology labels
// onto pods (the PodTopologyLabelsAdmission feature: alpha in Kubernetes
// 1.33, beta in 1.35; check that it is enabled on your API server), the
// downward API can read the label from the pod itself:
//
//	env:
//	  - name: AZKAFKA_AZ
//	    valueFrom:
//	      fieldRef:
//	        fieldPath: metadata.labels['topology.kubernetes.io/zone']
//
// If the label is absent the variable is empty and detection falls through
// to the other sources. On other clusters, set AZKAFKA_AZ per zone (for
// example one Deployment per zone with a nodeSelector on
// topology.kubernetes.io/zone). With no token mounted
// (automountServiceAccountToken: false) the kubernetes provider reports
// "not configured" without any network call.
package azdetect
