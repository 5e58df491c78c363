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
// # Sources
//
// An explicit zone — Config.AZ, or AZKAFKA_AZ / WARPSTREAM_AVAILABILITY_ZONE
// in the environment — is used as is and nothing touches the network. Without
// one, these providers run in parallel under one budget (Config.Timeout,
// AZKAFKA_DETECT_TIMEOUT, default 1 s):
//
//   - ecs: ${ECS_CONTAINER_METADATA_URI_V4}/task, field AvailabilityZone;
//   - ec2: IMDSv2 placement/availability-zone (or -id) through the AWS SDK;
//   - gcp: the metadata server's instance/zone through cloud.google.com/go/compute/metadata;
//   - azure: IMDS compute/location and compute/zone, joined as "eastus-1";
//   - kubernetes: the node's topology.kubernetes.io/zone label (or
//     topology.k8s.aws/zone-id), read from the API server with the pod's
//     service-account token.
//
// The precedence is fixed: option > env > ecs > ec2 > gcp > azure >
// kubernetes. The zone is that of the highest-ranked provider that answered
// with a valid zone, taken as soon as every provider ranked above it has
// failed, or else when the budget ends: a higher-ranked provider that
// answers within the budget wins over a faster lower one, and one still
// silent at the end of the budget loses to the answer in hand (its
// ProviderResult says it was cut by the budget). A provider
// whose prerequisites are absent (ECS_CONTAINER_METADATA_URI_V4 unset,
// KUBERNETES_SERVICE_HOST or NODE_NAME unset, AWS_EC2_METADATA_DISABLED=true)
// answers at once without I/O; a refused connection or a 4xx answer means
// "not this cloud" at once, without retries.
//
// # Safety
//
// Every zone is trimmed and must match ^[a-z0-9-]{1,128}$ (Validate), so it
// cannot inject ',' or '=' into a client ID. Response bodies are capped,
// redirects are not followed, metadata requests never use an HTTP proxy, and
// no goroutine outlives a call to Detect.
//
// # Caching
//
// Detect and Detector.Detect run the detection once; concurrent first
// callers share it. A failure is cached too, so a process off-cloud pays the
// budget once at start-up; Redetect runs a new detection, e.g. to improve an
// answer taken when a higher-ranked provider was cut by the budget. The
// caller's context acts as a shorter budget: when it ends first, the answer
// in hand is returned and cached; with none, its error is returned and
// nothing is cached.
package azdetect
