module github.com/weftrpc/weft/plugins/serialization/hessian2/oracle

go 1.26.0

// The core is the module under test; dubbo-go-hessian2 is the reference it is
// compared with, required here and not by the core.
replace github.com/weftrpc/weft => ../../../..

require (
	github.com/apache/dubbo-go-hessian2 v1.12.5
	github.com/weftrpc/weft v0.0.0-00010101000000-000000000000
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dubbogo/gost v1.13.1 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel v1.47.0 // indirect
	go.opentelemetry.io/otel/log v1.47.0 // indirect
	go.opentelemetry.io/otel/metric v1.47.0 // indirect
	go.opentelemetry.io/otel/sdk v1.47.0 // indirect
	go.opentelemetry.io/otel/trace v1.47.0 // indirect
	go.uber.org/atomic v1.9.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
