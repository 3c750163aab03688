package xds

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Bootstrap is what an xDS client needs to join a control plane, in
// grpc-go's bootstrap format (gRFC A27, A29), which Istio's agent writes
// for proxyless clients (/etc/istio/proxy/grpc-bootstrap.json): weft
// reads the same file, so one pod's bootstrap serves grpc-go and weft.
type Bootstrap struct {
	Servers []Server
	Node    Node
	// CertificateProviders are the certificate provider instances by name
	// (A29): "default" in Istio's bootstrap.
	CertificateProviders map[string]CertificateProvider
	// ServerListenerTemplate names a provider's inbound listener (A36):
	// "%s" is replaced by its ip:port. Istio:
	// "xds.istio.io/grpc/lds/inbound/%s".
	ServerListenerTemplate string
	// ClientListenerTemplate names a consumer's listener; "%s" is the
	// target (default "%s").
	ClientListenerTemplate string
}

// Server is one xDS management server.
type Server struct {
	URI string // host:port, or unix:///path
	// Creds is the first channel credential type weft supports:
	// "insecure" or "tls" (with TLS's files).
	Creds string
	TLS   TLSFiles
	// IgnoreResourceDeletion: a listener or cluster missing from a
	// response is kept, not deleted (server feature
	// ignore_resource_deletion, A53).
	IgnoreResourceDeletion bool
	// Delta: the incremental protocol (DeltaAggregatedResources) instead
	// of the state of the world; a weft setting (the registry address's
	// delta=true), as grpc-go has no delta.
	Delta bool
}

// TLSFiles are the files of the "tls" channel credentials.
type TLSFiles struct {
	CertificateFile, PrivateKeyFile, CACertificateFile string
}

// Node identifies the client to the control plane.
type Node struct {
	ID, Cluster string
	Locality    Locality
	Metadata    map[string]any
}

// Locality is where a node or an endpoint runs.
type Locality struct {
	Region, Zone, SubZone string
}

// CertificateProvider is a certificate provider instance (A29). weft
// knows grpc-go's "file_watcher" plugin.
type CertificateProvider struct {
	Plugin string
	// file_watcher's files and how often they are read again (default
	// 10 minutes).
	CertificateFile, PrivateKeyFile, CACertificateFile string
	Refresh                                            time.Duration
}

// FileWatcher is the certificate provider plugin weft knows.
const FileWatcher = "file_watcher"

// DefaultRefresh is file_watcher's refresh interval when its config sets
// none (grpc-go's).
const DefaultRefresh = 10 * time.Minute

// The environment variables grpc-go reads its bootstrap from: a file, or
// the JSON itself. The file wins when both are set.
const (
	EnvBootstrap       = "GRPC_XDS_BOOTSTRAP"
	EnvBootstrapConfig = "GRPC_XDS_BOOTSTRAP_CONFIG"
)

// maxBootstrap bounds a bootstrap file: it is read whole.
const maxBootstrap = 1 << 20

// BootstrapFromEnv reads the bootstrap grpc-go would: GRPC_XDS_BOOTSTRAP's
// file, else GRPC_XDS_BOOTSTRAP_CONFIG's JSON. ok is false when neither is
// set.
func BootstrapFromEnv() (b *Bootstrap, ok bool, err error) {
	if path := os.Getenv(EnvBootstrap); path != "" {
		b, err := ReadBootstrap(path)
		return b, true, err
	}
	if js := os.Getenv(EnvBootstrapConfig); js != "" {
		b, err := ParseBootstrap([]byte(js))
		if err != nil {
			err = fmt.Errorf("%s: %w", EnvBootstrapConfig, err)
		}
		return b, true, err
	}
	return nil, false, nil
}

// ReadBootstrap reads and parses the bootstrap file at path.
func ReadBootstrap(path string) (*Bootstrap, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("xds: bootstrap: %w", err)
	}
	defer f.Close()
	buf, err := io.ReadAll(io.LimitReader(f, maxBootstrap+1))
	if err != nil {
		return nil, fmt.Errorf("xds: bootstrap %s: %w", path, err)
	}
	if len(buf) > maxBootstrap {
		return nil, fmt.Errorf("xds: bootstrap %s is over %d bytes: is it a bootstrap file?", path, maxBootstrap)
	}
	b, err := ParseBootstrap(buf)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}

// The bootstrap's JSON, as grpc-go's configJSON; unknown fields are
// ignored (A27).
type bootstrapJSON struct {
	XDSServers []struct {
		ServerURI    string `json:"server_uri"`
		ChannelCreds []struct {
			Type   string          `json:"type"`
			Config json.RawMessage `json:"config"`
		} `json:"channel_creds"`
		ServerFeatures []string `json:"server_features"`
	} `json:"xds_servers"`
	Node *struct {
		ID       string `json:"id"`
		Cluster  string `json:"cluster"`
		Locality *struct {
			Region  string `json:"region"`
			Zone    string `json:"zone"`
			SubZone string `json:"sub_zone"`
		} `json:"locality"`
		Metadata map[string]any `json:"metadata"`
	} `json:"node"`
	CertificateProviders map[string]struct {
		PluginName string          `json:"plugin_name"`
		Config     json.RawMessage `json:"config"`
	} `json:"certificate_providers"`
	ServerListenerTemplate string `json:"server_listener_resource_name_template"`
	ClientListenerTemplate string `json:"client_default_listener_resource_name_template"`
}

type fileWatcherJSON struct {
	CertificateFile   string `json:"certificate_file"`
	PrivateKeyFile    string `json:"private_key_file"`
	CACertificateFile string `json:"ca_certificate_file"`
	RefreshInterval   string `json:"refresh_interval"`
}

type tlsCredsJSON struct {
	CertificateFile   string `json:"certificate_file"`
	PrivateKeyFile    string `json:"private_key_file"`
	CACertificateFile string `json:"ca_certificate_file"`
}

// ParseBootstrap parses a bootstrap in grpc-go's JSON format, with
// grpc-go's errors for what it refuses.
func ParseBootstrap(data []byte) (*Bootstrap, error) {
	var j bootstrapJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("xds: failed to parse bootstrap config: %v", err)
	}
	if len(j.XDSServers) == 0 {
		return nil, fmt.Errorf("xds: required field `xds_servers` not found in bootstrap configuration: %s", short(data))
	}
	b := &Bootstrap{ServerListenerTemplate: j.ServerListenerTemplate, ClientListenerTemplate: j.ClientListenerTemplate}
	if b.ClientListenerTemplate == "" {
		b.ClientListenerTemplate = "%s"
	}
	for _, s := range j.XDSServers {
		if s.ServerURI == "" {
			return nil, fmt.Errorf("xds: `server_uri` field in server config cannot be empty: %s", short(data))
		}
		if len(s.ChannelCreds) == 0 {
			return nil, fmt.Errorf("xds: `channel_creds` field in server config cannot be empty: %s", short(data))
		}
		srv := Server{URI: s.ServerURI}
		// "We stop at the first credential type that we support."
		for _, c := range s.ChannelCreds {
			switch c.Type {
			case "insecure":
				srv.Creds = "insecure"
			case "tls":
				var t tlsCredsJSON
				if len(c.Config) > 0 {
					if err := json.Unmarshal(c.Config, &t); err != nil {
						return nil, fmt.Errorf("xds: server %s: tls channel_creds config: %v", s.ServerURI, err)
					}
				}
				srv.Creds = "tls"
				srv.TLS = TLSFiles{CertificateFile: t.CertificateFile, PrivateKeyFile: t.PrivateKeyFile, CACertificateFile: t.CACertificateFile}
			default:
				continue
			}
			break
		}
		if srv.Creds == "" {
			var types []string
			for _, c := range s.ChannelCreds {
				types = append(types, c.Type)
			}
			return nil, fmt.Errorf("xds: server %s: none of its channel_creds (%s) is one weft supports: insecure, tls", s.ServerURI, strings.Join(types, ", "))
		}
		for _, f := range s.ServerFeatures {
			if f == "ignore_resource_deletion" {
				srv.IgnoreResourceDeletion = true
			}
		}
		b.Servers = append(b.Servers, srv)
	}
	if n := j.Node; n != nil {
		b.Node = Node{ID: n.ID, Cluster: n.Cluster, Metadata: n.Metadata}
		if l := n.Locality; l != nil {
			b.Node.Locality = Locality{Region: l.Region, Zone: l.Zone, SubZone: l.SubZone}
		}
	}
	for name, p := range j.CertificateProviders {
		if p.PluginName != FileWatcher {
			// grpc-go ignores plugins it does not know.
			continue
		}
		var fw fileWatcherJSON
		if len(p.Config) > 0 {
			if err := json.Unmarshal(p.Config, &fw); err != nil {
				return nil, fmt.Errorf("xds: config parsing for certificate provider plugin %q failed during bootstrap: %v", p.PluginName, err)
			}
		}
		cp := CertificateProvider{Plugin: FileWatcher, CertificateFile: fw.CertificateFile, PrivateKeyFile: fw.PrivateKeyFile,
			CACertificateFile: fw.CACertificateFile, Refresh: DefaultRefresh}
		if fw.RefreshInterval != "" {
			d, err := parseProtoDuration(fw.RefreshInterval)
			if err != nil {
				return nil, fmt.Errorf("xds: config parsing for certificate provider plugin %q failed during bootstrap: refresh_interval: %v", p.PluginName, err)
			}
			cp.Refresh = d
		}
		switch {
		case cp.CertificateFile == "" && cp.PrivateKeyFile == "" && cp.CACertificateFile == "":
			return nil, fmt.Errorf("xds: certificate provider %q: pemfile: at least one credential file needs to be specified", name)
		case (cp.CertificateFile == "") != (cp.PrivateKeyFile == ""):
			return nil, fmt.Errorf("xds: certificate provider %q: pemfile: private key file and identity cert file should be both specified or not specified", name)
		}
		if b.CertificateProviders == nil {
			b.CertificateProviders = map[string]CertificateProvider{}
		}
		b.CertificateProviders[name] = cp
	}
	return b, nil
}

// parseProtoDuration reads a protobuf JSON Duration ("600s", "1.5s").
func parseProtoDuration(s string) (time.Duration, error) {
	num, ok := strings.CutSuffix(s, "s")
	if !ok {
		return 0, fmt.Errorf("%q: want seconds such as \"600s\"", s)
	}
	d, err := time.ParseDuration(num + "s")
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q: want a positive number of seconds such as \"600s\"", s)
	}
	return d, nil
}

func short(b []byte) string {
	const max = 256
	if len(b) > max {
		return string(b[:max]) + "..."
	}
	return string(b)
}
