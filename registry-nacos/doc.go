// Package nacos will hold the Nacos registry and config source on
// nacos-sdk-go/v2: Dubbo's service names providers:<interface>:<version>:<group>,
// push subscriptions, re-registration after a server restart, and config data
// ids merged into an App's config. It implements extension.Registry under the
// name "nacos".
package nacos
