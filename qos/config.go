package qos

import (
	"fmt"
	"net"
	"strconv"
)

// Settings is Dubbo's QoS server (`qos:` in weft's YAML): Java's
// dubbo.application.qos-enable, qos-port and qos-accept-foreign-ip
// (qos.enable, qos.port, qos.accept.foreign.ip in Dubbo 2.x), with
// Dubbo's defaults. One port answers telnet and HTTP: the commands (ls,
// online, offline, ...), Kubernetes' probes (/live, /ready, /startup) and
// /metrics. dubbo-go 3.3 has no QoS server, so Java's names are the ones a
// Dubbo user knows.
type Settings struct {
	// Enable starts the server; unset: true, as in Dubbo.
	Enable *bool `koanf:"enable"`
	// Port to listen on; unset: Dubbo's 22222; 0: a free port (see
	// App.QoSAddr). A port another process (or App) holds is logged as a
	// warning and the App runs without QoS, as Dubbo does.
	Port *int `koanf:"port"`
	// AcceptForeignIP false (Dubbo's default since 2.6.4/2.7.0) listens on
	// 127.0.0.1 only; true on every interface, which Kubernetes' probes
	// need (they come from the node, to the pod's IP). The commands have
	// no authentication: whoever reaches the port can take the App
	// offline.
	AcceptForeignIP bool `koanf:"accept_foreign_ip"`
}

// Enabled says whether the server starts.
func (c Settings) Enabled() bool { return c.Enable == nil || *c.Enable }

// ListenPort is the port to listen on, Dubbo's default when unset.
func (c Settings) ListenPort() int {
	if c.Port == nil {
		return DefaultPort
	}
	return *c.Port
}

// Addr is where the server listens.
func (c Settings) Addr() string {
	host := "127.0.0.1"
	if c.AcceptForeignIP {
		host = ""
	}
	return net.JoinHostPort(host, strconv.Itoa(c.ListenPort()))
}

// Validate reports a qos setting out of range with its key path, what is
// allowed and the fix; weft.New runs it with the rest of the config.
func (c Settings) Validate() []error {
	if c.Port == nil || *c.Port >= 0 && *c.Port <= 65535 {
		return nil
	}
	return []error{fmt.Errorf("qos.port: %d is not allowed: want 0..65535 (unset: Dubbo's 22222; 0 picks a free port); "+
		"set a TCP port such as 22222, 0 for any free one, or qos.enable: false", *c.Port)}
}
