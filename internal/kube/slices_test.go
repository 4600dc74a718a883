package kube

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/probegate/probegate/internal/config"
)

// endpoint is one EndpointSlice endpoint for a test pod.
func endpoint(ip, pod string, ready, terminating bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{
		Addresses:  []string{ip},
		Conditions: discoveryv1.EndpointConditions{Ready: ptr(ready), Terminating: ptr(terminating)},
		TargetRef:  &corev1.ObjectReference{Kind: "Pod", Name: pod, Namespace: "models"},
	}
}

// slice is an EndpointSlice of Service svc with one port.
func slice(name, svc string, port int32, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: "models", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(port)}},
		Endpoints:   eps,
	}
}

func svcConfig() config.Kubernetes {
	return config.Kubernetes{Service: "vllm", Namespace: "models"}
}

func updateSlice(t *testing.T, cs *fake.Clientset, es *discoveryv1.EndpointSlice) {
	t.Helper()
	if _, err := cs.DiscoveryV1().EndpointSlices("models").Update(context.Background(), es, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// The life of a Service's endpoints: the initial set holds only ready,
// non-terminating endpoints; each later change publishes the new set.
func TestEndpointSliceLifecycle(t *testing.T) {
	es := slice("vllm-abc", "vllm", 8000,
		endpoint("10.0.0.1", "a", true, false),
		endpoint("10.0.0.2", "b", false, false), // starting, not ready yet
		endpoint("10.0.0.3", "c", false, true),  // being deleted
	)
	other := slice("other-xyz", "other", 8000, endpoint("10.9.9.9", "z", true, false))
	cs := fake.NewClientset(es, other)
	s := newSets()
	var lb logBuf
	initial, stop, err := StartWith(Clients{EndpointSlices: cs.DiscoveryV1(), Root: cs}, svcConfig(), lb.logger(), s.publish, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	want(t, urls(initial), "10.0.0.1:8000")
	if o := initial[0].Origin; o != "kubernetes:endpointslice/models/vllm-abc pod/a" {
		t.Fatalf("origin %q", o)
	}

	// b becomes ready: it joins.
	es = es.DeepCopy()
	es.Endpoints[1].Conditions.Ready = ptr(true)
	updateSlice(t, cs, es)
	want(t, s.next(t), "10.0.0.1:8000", "10.0.0.2:8000")

	// A new endpoint is added.
	es = es.DeepCopy()
	es.Endpoints = append(es.Endpoints, endpoint("10.0.0.4", "d", true, false))
	updateSlice(t, cs, es)
	want(t, s.next(t), "10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.4:8000")

	// a turns not ready (its readiness probe fails): it leaves.
	es = es.DeepCopy()
	es.Endpoints[0].Conditions.Ready = ptr(false)
	updateSlice(t, cs, es)
	want(t, s.next(t), "10.0.0.2:8000", "10.0.0.4:8000")

	// b starts terminating while its readiness still says ready (as with
	// publishNotReadyAddresses): terminating alone drains it.
	es = es.DeepCopy()
	es.Endpoints[1].Conditions.Terminating = ptr(true)
	updateSlice(t, cs, es)
	want(t, s.next(t), "10.0.0.4:8000")

	// A second slice of the same Service adds its endpoints.
	es2 := slice("vllm-def", "vllm", 8000, endpoint("10.0.1.1", "e", true, false))
	if _, err := cs.DiscoveryV1().EndpointSlices("models").Create(context.Background(), es2, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want(t, s.next(t), "10.0.0.4:8000", "10.0.1.1:8000")

	// Removed slices take their endpoints with them.
	if err := cs.DiscoveryV1().EndpointSlices("models").Delete(context.Background(), "vllm-abc", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want(t, s.next(t), "10.0.1.1:8000")
	if err := cs.DiscoveryV1().EndpointSlices("models").Delete(context.Background(), "vllm-def", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want(t, s.next(t))

	// Another Service's slice never shows up.
	other = other.DeepCopy()
	other.Endpoints = append(other.Endpoints, endpoint("10.9.9.8", "y", true, false))
	if _, err := cs.DiscoveryV1().EndpointSlices("models").Update(context.Background(), other, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.none(t, 200*time.Millisecond)
}

func TestEndpointSlicePorts(t *testing.T) {
	multi := slice("vllm-abc", "vllm", 8000, endpoint("10.0.0.1", "a", true, false))
	multi.Ports = append(multi.Ports, discoveryv1.EndpointPort{Name: ptr("metrics"), Port: ptr(int32(9000))})
	tests := []struct {
		name string
		port int
		want []string
		warn string
	}{
		{"several ports need port", 0, nil, "EndpointSlice has several ports"},
		{"port picks one", 9000, []string{"10.0.0.1:9000"}, ""},
		{"port not listed", 7000, nil, "does not list backends.kubernetes.port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := fake.NewClientset(multi)
			var lb logBuf
			k := svcConfig()
			k.Port = tt.port
			initial, stop, err := StartWith(Clients{EndpointSlices: cs.DiscoveryV1(), Root: cs}, k, lb.logger(), newSets().publish, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			stop()
			want(t, urls(initial), tt.want...)
			if tt.warn != "" && lb.count(tt.warn) != 1 {
				t.Fatalf("want one log line with %q", tt.warn)
			}
		})
	}
}

// An API outage keeps the last set (nothing published), is logged once
// however many retries fail, and the recovery is logged once; changes made
// after it are seen.
func TestEndpointSliceAPIUnavailable(t *testing.T) {
	es := slice("vllm-abc", "vllm", 8000, endpoint("10.0.0.1", "a", true, false), endpoint("10.0.0.2", "b", true, false))
	cs := fake.NewClientset(es)
	var down atomic.Bool
	var calls atomic.Int64
	var current atomic.Pointer[watch.FakeWatcher]
	unavailable := errors.New("dial tcp 10.96.0.1:443: connect: connection refused")
	cs.PrependReactor("list", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		if down.Load() {
			calls.Add(1)
			return true, nil, unavailable
		}
		return false, nil, nil
	})
	cs.PrependWatchReactor("endpointslices", func(k8stesting.Action) (bool, watch.Interface, error) {
		if down.Load() {
			calls.Add(1)
			return true, nil, unavailable
		}
		w := watch.NewFakeWithChanSize(8, false)
		current.Store(w)
		return true, w, nil
	})
	s := newSets()
	var lb logBuf
	initial, stop, err := StartWith(Clients{EndpointSlices: cs.DiscoveryV1(), Root: cs}, svcConfig(), lb.logger(), s.publish, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	want(t, urls(initial), "10.0.0.1:8000", "10.0.0.2:8000")

	// The informer opens its watch after the initial list, asynchronously:
	// StartWith can return before the watch exists (seen under load, as a
	// nil watcher here).
	deadline := time.Now().Add(10 * time.Second)
	for current.Load() == nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if current.Load() == nil {
		t.Fatal("the informer opened no watch in 10s")
	}
	// The connection drops and every reconnection fails.
	down.Store(true)
	current.Load().Stop()
	deadline = time.Now().Add(10 * time.Second)
	for calls.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if calls.Load() < 2 {
		t.Fatalf("the informer retried %d times in 10s", calls.Load())
	}
	s.none(t, 50*time.Millisecond) // the last set stays
	if n := lb.count("Kubernetes API unreachable: keeping the last known backends"); n != 1 {
		t.Fatalf("outage logged %d times over %d failed calls, want once", n, calls.Load())
	}

	// The API comes back; the informer re-lists, which brings a change
	// made during the outage.
	es = es.DeepCopy()
	es.Endpoints[1].Conditions.Terminating = ptr(true)
	if err := cs.Tracker().Update(discoveryv1.SchemeGroupVersion.WithResource("endpointslices"), es, "models"); err != nil {
		t.Fatal(err)
	}
	down.Store(false)
	// client-go's reflector backs off 800 ms doubling with up to 100%
	// jitter between failed calls (capped at 30 s); after two or three
	// failures the next attempt can be 6 s away, so 5 s was too short.
	want(t, s.nextWithin(t, 40*time.Second), "10.0.0.1:8000")
	if n := lb.count("Kubernetes API reachable again"); n != 1 {
		t.Fatalf("recovery logged %d times, want once", n)
	}
}
