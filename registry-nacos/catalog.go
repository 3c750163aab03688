package nacos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/model"

	"github.com/weftrpc/weft/kernel"
	"github.com/weftrpc/weft/kernel/view"
)

// catalogPage is how many service names one list request asks for, and
// catalogMax bounds the walk: a listing is for people and tools, and a
// namespace with more services than this is cut rather than walked for
// minutes. maxBody bounds what one answer may hold.
const (
	catalogPage = 200
	catalogMax  = 10000
	maxBody     = 32 << 20
)

// catalogClient reads a Nacos server's open HTTP API (v1), which reads
// without subscribing.
type catalogClient struct {
	base      string // http://host:port/nacos
	namespace string
	user      string
	password  string
	http      *http.Client

	mu    sync.Mutex
	token string // accessToken after a login, for servers with auth
}

func newCatalogClient(where string, u *kernel.URL, timeoutMs uint64) *catalogClient {
	return &catalogClient{
		base:      "http://" + where + "/nacos",
		namespace: u.Param("namespace"),
		user:      u.Username,
		password:  u.Password,
		http:      &http.Client{Timeout: time.Duration(timeoutMs) * time.Millisecond},
	}
}

// services lists the namespace's service names in weft's group.
func (c *catalogClient) services(ctx context.Context) ([]string, error) {
	var names []string
	for page := 1; (page-1)*catalogPage < catalogMax; page++ {
		var list struct {
			Count int64    `json:"count"`
			Doms  []string `json:"doms"`
		}
		q := url.Values{"pageNo": {strconv.Itoa(page)}, "pageSize": {strconv.Itoa(catalogPage)}, "groupName": {Group}}
		if err := c.get(ctx, "/v1/ns/service/list", q, &list); err != nil {
			return nil, fmt.Errorf("nacos: list services: %w", err)
		}
		names = append(names, list.Doms...)
		if len(list.Doms) < catalogPage || int64(page)*catalogPage >= list.Count {
			break
		}
	}
	return names, nil
}

// instances lists the instances of svc.
func (c *catalogClient) instances(ctx context.Context, svc string) ([]model.Instance, error) {
	var s struct {
		Hosts []model.Instance `json:"hosts"`
	}
	q := url.Values{"serviceName": {svc}, "groupName": {Group}, "healthyOnly": {"false"}}
	if err := c.get(ctx, "/v1/ns/instance/list", q, &s); err != nil {
		return nil, fmt.Errorf("nacos: instances of %s: %w", svc, err)
	}
	return s.Hosts, nil
}

func (c *catalogClient) get(ctx context.Context, path string, q url.Values, into any) error {
	if c.namespace != "" {
		q.Set("namespaceId", c.namespace)
	}
	if c.user != "" {
		tok, err := c.login(ctx)
		if err != nil {
			return err
		}
		q.Set("accessToken", tok)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path+"?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	return c.do(req, into)
}

// login gets an access token once (servers with auth).
func (c *catalogClient) login(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token != "" {
		return c.token, nil
	}
	form := url.Values{"username": {c.user}, "password": {c.password}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/auth/login", nil)
	if err != nil {
		return "", err
	}
	req.URL.RawQuery = form.Encode()
	var res struct {
		AccessToken string `json:"accessToken"`
	}
	if err := c.do(req, &res); err != nil {
		return "", fmt.Errorf("login as %s: %w", c.user, err)
	}
	c.token = res.AccessToken
	return c.token, nil
}

func (c *catalogClient) do(req *http.Request, into any) error {
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		// The server's own words, cut: they may echo what we sent.
		return fmt.Errorf("%s %s: %s: %s", req.Method, req.URL.Path, resp.Status, view.Cut(string(body), 300))
	}
	if err := json.Unmarshal(body, into); err != nil {
		return fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, err)
	}
	return nil
}
