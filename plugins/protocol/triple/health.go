package triple

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/weftrpc/weft/kernel"
	netty "github.com/weftrpc/weft/transport-netty"
)

// The standard health service (grpc.health.v1.Health, grpc/grpc's
// doc/health-checking.md), answered by every Triple server unless the
// application exports one of its own: probes (Kubernetes' grpc probe,
// grpc_health_probe, load balancers) ask it whether the server, or one
// service, serves.
const (
	healthService = "grpc.health.v1.Health"

	healthServing    = 1
	healthNotServing = 2
)

// health answers Check: SERVING for the server ("") and for each exported
// service, NOT_SERVING once the server is stopping, NOT_FOUND (the gRPC
// status) for a service not exported here. Watch, a stream, is not served.
func (h *handler) health(ctx context.Context, st *stream, c *call, msg []byte) *netty.Response {
	if c.method != "Check" {
		return trailersOnly(st.id, statusUnimplemented, kernel.CodeMethodNotFound,
			fmt.Sprintf("%s/%s is not served here (Check is)", healthService, cut(c.method)))
	}
	svc, err := healthRequest(msg)
	if err != nil {
		return trailersOnly(st.id, statusInternal, kernel.CodeSerialization, "HealthCheckRequest: "+err.Error())
	}
	status := healthServing
	switch {
	case st.sc.stopping.Load() || h.s.exporters.Len() == 0:
		status = healthNotServing
	case svc != "" && !h.s.exports(svc):
		return trailersOnly(st.id, statusNotFound, kernel.CodeServiceNotFound, fmt.Sprintf("service %q is not exported here", cut(svc)))
	}
	// HealthCheckResponse{status = 1}: a varint field.
	out := []byte{0, 0, 0, 0, 2, byte(protowire.EncodeTag(1, protowire.VarintType)), byte(status)}
	return h.answer(ctx, st, c, out, nil, nil)
}

// healthRequest reads HealthCheckRequest{string service = 1}.
func healthRequest(b []byte) (string, error) {
	var svc string
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", protowire.ParseError(n)
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			v, m := protowire.ConsumeString(b)
			if m < 0 {
				return "", protowire.ParseError(m)
			}
			svc, b = v, b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return "", protowire.ParseError(m)
		}
		b = b[m:]
	}
	return svc, nil
}

// exports reports whether any exported service has interface iface (any
// group and version).
func (s *server) exports(iface string) bool {
	found := false
	s.exporters.Each(func(_ string, e *exporter) { found = found || e.invoker.URL().Interface() == iface })
	return found
}

// healthFiles holds grpc/health/v1/health.proto for reflection, so that
// tools that need the descriptor (grpcurl) call the health service of a
// program that links no generated health code. It is this package's own
// registry, not protobuf's global one; a program that links the generated
// code has it there, and reflection looks there first.
var healthFiles = func() *protoregistry.Files {
	str := func(s string) *string { return &s }
	i32 := func(n int32) *int32 { return &n }
	optional := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()
	fdp := &descriptorpb.FileDescriptorProto{
		Name:    str("grpc/health/v1/health.proto"),
		Package: str("grpc.health.v1"),
		Syntax:  str("proto3"),
		Options: &descriptorpb.FileOptions{GoPackage: str("google.golang.org/grpc/health/grpc_health_v1")},
		MessageType: []*descriptorpb.DescriptorProto{
			{Name: str("HealthCheckRequest"), Field: []*descriptorpb.FieldDescriptorProto{
				{Name: str("service"), Number: i32(1), Label: optional, Type: descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(), JsonName: str("service")}}},
			{Name: str("HealthCheckResponse"),
				Field: []*descriptorpb.FieldDescriptorProto{
					{Name: str("status"), Number: i32(1), Label: optional, Type: descriptorpb.FieldDescriptorProto_TYPE_ENUM.Enum(),
						TypeName: str(".grpc.health.v1.HealthCheckResponse.ServingStatus"), JsonName: str("status")}},
				EnumType: []*descriptorpb.EnumDescriptorProto{{Name: str("ServingStatus"), Value: []*descriptorpb.EnumValueDescriptorProto{
					{Name: str("UNKNOWN"), Number: i32(0)}, {Name: str("SERVING"), Number: i32(1)},
					{Name: str("NOT_SERVING"), Number: i32(2)}, {Name: str("SERVICE_UNKNOWN"), Number: i32(3)}}}}},
		},
		Service: []*descriptorpb.ServiceDescriptorProto{{Name: str("Health"), Method: []*descriptorpb.MethodDescriptorProto{
			{Name: str("Check"), InputType: str(".grpc.health.v1.HealthCheckRequest"), OutputType: str(".grpc.health.v1.HealthCheckResponse")},
			{Name: str("Watch"), InputType: str(".grpc.health.v1.HealthCheckRequest"), OutputType: str(".grpc.health.v1.HealthCheckResponse"),
				ServerStreaming: proto.Bool(true)},
		}}},
	}
	fd, err := protodesc.NewFile(fdp, nil)
	if err != nil {
		panic("triple: health.proto: " + err.Error()) // a bug in the literal above
	}
	files := new(protoregistry.Files)
	if err := files.RegisterFile(fd); err != nil {
		panic("triple: health.proto: " + err.Error())
	}
	return files
}()
