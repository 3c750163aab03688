// Command attack runs weft's connection-level attack suite (package
// attack) against builds of the echo provider, each case on a fresh
// provider process, and prints one line per case: the provider's RSS
// growth and CPU, the legitimate probe's success and p99 (idle in
// brackets), and when the provider closed the attacking connections.
//
//	go build -o /tmp/echo ./apps/examples/echo
//	cd test && go run ./attack/cmd/attack -provider /tmp/echo [-provider /tmp/echo-old] [-case CONTINUATION]
//
// With several -provider flags, each case runs against each build in turn
// (the same case back to back, so that both meet the same machine).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/weftrpc/weft/test/attack"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var bins list
	flag.Var(&bins, "provider", "a build of apps/examples/echo (repeatable)")
	only := flag.String("case", "", "run the cases whose name or protocol contains this")
	verbose := flag.Bool("v", false, "print the provider's output when a probe call failed")
	flag.Parse()
	if len(bins) == 0 {
		flag.Usage()
		os.Exit(2)
	}
	for _, c := range attack.Cases() {
		if *only != "" && !strings.Contains(c.Name+" "+c.Proto, *only) {
			continue
		}
		for _, bin := range bins {
			p, err := attack.StartProvider(bin)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			r := attack.Run(context.Background(), p.Target, c)
			alive := p.Alive()
			p.Stop()
			fmt.Printf("%-22s %s", bin, r)
			if !alive {
				fmt.Print("  PROVIDER DIED")
			}
			if r.Probe.FirstErr != "" {
				fmt.Printf("  first probe error: %.120s", r.Probe.FirstErr)
				if *verbose {
					fmt.Printf("\nprovider output:\n%s\n", p.Output())
				}
			}
			if len(r.Errs) > 0 {
				fmt.Printf("  attack errors: %d (%.120s)", len(r.Errs), r.Errs[0])
			}
			fmt.Println()
		}
	}
}
