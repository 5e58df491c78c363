// Package azdetect finds the availability zone (AZ) the process runs in.
//
// It asks an explicit override and the cloud metadata services (AWS ECS and
// EC2, GCP, Azure, Kubernetes) in parallel under one time budget, validates
// the answer and caches it for the life of the process.
package azdetect
