package dubbo_test

import (
	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/plugins/protocol/dubbo"
	netty "github.com/weftrpc/weft/transport-netty"
)

func requestOf(id uint64, method string, args ...any) *netty.Request {
	return &netty.Request{ID: id, TwoWay: true, Data: &dubbo.RPCRequest{
		DubboVersion: dubbo.DubboVersion, Path: iface, Method: method, Args: args,
		Attachments: map[string]any{kernel.KeyInterface: iface, kernel.KeyPath: iface}}}
}
