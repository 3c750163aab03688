// Package echoservice is the benchmark and interop service
// org.weft.bench.EchoService, callable by any Dubbo client:
//
//	String echo(String)
//	org.weft.bench.User getUser(long)
//	void fail(String)          // throws a business exception
package echoservice

import (
	"context"
	"fmt"
	"sync/atomic"
)

// Interface is the service's Java interface name.
const Interface = "org.weft.bench.EchoService"

// User is the POJO org.weft.bench.User.
type User struct {
	ID    int64    `hessian:"id"`
	Name  string   `hessian:"name"`
	Tags  []string `hessian:"tags"`
	Score float64  `hessian:"score"`
}

// JavaClassName names the Java class for hessian2.
func (User) JavaClassName() string { return "org.weft.bench.User" }

// Service implements EchoService and counts its calls.
type Service struct {
	Echoes, Users, Fails atomic.Int64
}

// Echo returns s.
func (s *Service) Echo(ctx context.Context, v string) (string, error) {
	s.Echoes.Add(1)
	return v, nil
}

// GetUser returns the user id: name "user-<id>", tags [a b c], score id*1.5.
func (s *Service) GetUser(ctx context.Context, id int64) (*User, error) {
	s.Users.Add(1)
	return &User{ID: id, Name: fmt.Sprintf("user-%d", id), Tags: []string{"a", "b", "c"}, Score: float64(id) * 1.5}, nil
}

// Fail always fails with a business error naming msg.
func (s *Service) Fail(ctx context.Context, msg string) error {
	s.Fails.Add(1)
	return fmt.Errorf("fail called with %q", msg)
}

// Client is the consumer stub of EchoService.
type Client struct {
	Echo    func(ctx context.Context, v string) (string, error)
	GetUser func(ctx context.Context, id int64) (*User, error)
	Fail    func(ctx context.Context, msg string) error
}
