// Package cluster is Dubbo's Cluster layer on the consumer side: a Directory
// lists the providers of a reference, routers narrow the list, a LoadBalance
// picks one, and the cluster strategy (failover, failfast, ...) decides what
// a failure means.
//
// The whole call, retries included, stays inside one deadline: the reference's
// `timeout` (method-level first) or the caller's context deadline, whichever
// comes first.
package cluster
