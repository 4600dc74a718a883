package kube

import (
	"context"
	"net"
	"slices"
	"strconv"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	discoveryv1client "k8s.io/client-go/kubernetes/typed/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/route"
)

// sliceSource watches the EndpointSlices of one Service (label
// kubernetes.io/service-name) and keeps the endpoints that are ready and
// not terminating.
type sliceSource struct {
	k      config.Kubernetes
	w      *watcher
	inf    cache.SharedIndexInformer
	warned map[string]bool // worker only: slices already logged as unusable
}

func newSliceSource(c discoveryv1client.EndpointSlicesGetter, k config.Kubernetes, w *watcher) *sliceSource {
	sel := discoveryv1.LabelServiceName + "=" + k.Service
	api := c.EndpointSlices(k.Namespace)
	inf := informerOf(w, api, func(o *metav1.ListOptions) { o.LabelSelector = sel }, &discoveryv1.EndpointSlice{})
	return &sliceSource{k: k, w: w, inf: inf, warned: make(map[string]bool)}
}

func (s *sliceSource) run(ctx context.Context) { s.w.runInformer(ctx, s.inf) }

func (s *sliceSource) synced() bool { return s.inf.HasSynced() }

// targets lists every ready, non-terminating endpoint address of every
// slice, at the configured port, sorted and without duplicates (an address
// may sit in two slices while the controller moves it).
func (s *sliceSource) targets(context.Context) []route.Target {
	var out []route.Target
	seen := make(map[string]bool)
	for _, obj := range s.inf.GetStore().List() {
		es, ok := obj.(*discoveryv1.EndpointSlice)
		// The label check repeats the informer's selector: a cache must
		// never serve another Service's pods, whatever the client filtered.
		if !ok || es.AddressType == discoveryv1.AddressTypeFQDN || es.Labels[discoveryv1.LabelServiceName] != s.k.Service {
			continue
		}
		port, ok := s.port(es)
		if !ok {
			continue
		}
		origin := "kubernetes:endpointslice/" + es.Namespace + "/" + es.Name
		for _, ep := range es.Endpoints {
			if !endpointServing(ep) {
				continue
			}
			o := origin
			if ep.TargetRef != nil && ep.TargetRef.Kind == "Pod" {
				o += " pod/" + ep.TargetRef.Name
			}
			for _, a := range ep.Addresses {
				hp := net.JoinHostPort(a, strconv.Itoa(port))
				if seen[hp] {
					continue
				}
				seen[hp] = true
				out = append(out, route.Target{URL: hp, Origin: o})
			}
		}
	}
	slices.SortFunc(out, func(a, b route.Target) int { return strings.Compare(a.URL, b.URL) })
	return out
}

// endpointServing reports whether an endpoint may take new requests: ready
// (nil means ready, per the EndpointSlice API) and not terminating. A pod
// being deleted turns terminating (and not ready) as soon as its deletion
// starts, before its containers get SIGTERM's grace period.
func endpointServing(ep discoveryv1.Endpoint) bool {
	c := ep.Conditions
	if c.Ready != nil && !*c.Ready {
		return false
	}
	return c.Terminating == nil || !*c.Terminating
}

// port picks the slice's port: backends.kubernetes.port when the slice
// lists it (or lists no port), else the slice's only port when port is 0.
// A slice with no usable port is skipped and logged once.
func (s *sliceSource) port(es *discoveryv1.EndpointSlice) (int, bool) {
	var nums []int
	for _, p := range es.Ports {
		if p.Port != nil {
			nums = append(nums, int(*p.Port))
		}
	}
	switch {
	case s.k.Port != 0 && (len(nums) == 0 || slices.Contains(nums, s.k.Port)):
		return s.k.Port, true
	case s.k.Port == 0 && len(nums) == 1:
		return nums[0], true
	}
	if key := es.Name + "/" + strconv.Itoa(len(nums)); !s.warned[key] {
		s.warned[key] = true
		ev := s.w.log.Warn().Str("endpointslice", es.Name).Ints("ports", nums)
		if s.k.Port != 0 {
			ev.Int("backends.kubernetes.port", s.k.Port).Msg("EndpointSlice does not list backends.kubernetes.port: its endpoints are skipped")
		} else {
			ev.Msg("EndpointSlice has several ports: set backends.kubernetes.port; its endpoints are skipped")
		}
	}
	return 0, false
}
