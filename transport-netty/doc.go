// Package netty is weft's Netty-style transport and Dubbo's exchange layer.
//
// The transport (Transporter, Server, Channel) moves frames over TCP: each
// connection has a read loop that decodes frames and hands them to a
// ChannelHandler, and a write loop that flushes every frame queued since its
// last write in one system call, so concurrent calls share syscalls instead
// of taking one each. The codec is the protocol's (extension.Codec).
//
// The exchange layer (Request, Response, ExchangeClient, ExchangeHandler)
// correlates requests and responses by id, bounds every call by its deadline,
// answers and sends heartbeats, closes idle connections and reconnects.
package netty
