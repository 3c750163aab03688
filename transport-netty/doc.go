// Package netty will hold weft's Netty-style transport: server and client
// bootstrap on TCP, a read loop and a batching write loop per connection,
// handler events (connected, disconnected, received, caught), and the exchange
// layer (request ids, pending calls with deadlines, heartbeats, idle close,
// reconnect). It implements extension.Transporter under the name "netty".
package netty
