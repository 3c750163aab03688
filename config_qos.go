package weft

import (
	"fmt"
	"net"
	"strconv"

	"github.com/weftrpc/weft/qos"
)

// QoSConfig is Dubbo's QoS server (`qos:` in weft's YAML): Java's
// dubbo.application.qos-enable, qos-port and qos-accept-foreign-ip
// (qos.enable, qos.port, qos.accept.foreign.ip in Dubbo 2.x), with
// Dubbo's defaults. One port answers telnet and HTTP: the commands (ls,
// online, offline, ...), Kubernetes' probes (/live, /ready, /startup) and
// /metrics. dubbo-go 3.3 has no QoS server, so Java's names are the ones a
// Dubbo user knows.
type QoSConfig struct {
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

func (c QoSConfig) enabled() bool { return c.Enable == nil || *c.Enable }

func (c QoSConfig) port() int {
	if c.Port == nil {
		return qos.DefaultPort
	}
	return *c.Port
}

// addr is where the server listens.
func (c QoSConfig) addr() string {
	host := "127.0.0.1"
	if c.AcceptForeignIP {
		host = ""
	}
	return net.JoinHostPort(host, strconv.Itoa(c.port()))
}

var ruleQoSPort = valueRule{min: 0, max: 65535,
	want: "0..65535 (unset: Dubbo's 22222; 0 picks a free port)",
	fix:  "set a TCP port such as 22222, 0 for any free one, or qos.enable: false"}

// check reports a qos setting out of range, as checkValues does for the
// others (key path, value, what is allowed, the fix).
func (c QoSConfig) check() []error {
	if c.Port == nil {
		return nil
	}
	r, v := ruleQoSPort, *c.Port
	if int64(v) >= r.min && int64(v) <= r.max {
		return nil
	}
	return []error{fmt.Errorf("qos.port: %d is not allowed: want %s; %s", v, r.want, r.fix)}
}
