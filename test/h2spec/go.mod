// h2spec (github.com/summerwind/h2spec), the HTTP/2 conformance suite, run
// against a weft Triple provider: a module of its own, so that its pins
// reach no other go.mod.
module github.com/weftrpc/weft/test/h2spec

go 1.26.0

require (
	github.com/weftrpc/weft v0.0.0
	google.golang.org/protobuf v1.36.8
)

require (
	github.com/apache/dubbo-go-hessian2 v1.12.5 // indirect
	github.com/dubbogo/gost v1.13.1 // indirect
	github.com/fatih/color v1.19.0 // indirect
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/spf13/cobra v1.10.2 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
	github.com/summerwind/h2spec v2.2.1+incompatible // indirect
	go.uber.org/atomic v1.9.0 // indirect
	golang.org/x/net v0.43.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.28.0 // indirect
)

replace github.com/weftrpc/weft => ../..

tool github.com/summerwind/h2spec/cmd/h2spec
