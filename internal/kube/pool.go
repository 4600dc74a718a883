package kube

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/route"
)

// InferencePoolGVR is the Gateway API Inference Extension's InferencePool,
// read through the dynamic client (no generated types).
var InferencePoolGVR = schema.GroupVersionResource{Group: "inference.networking.k8s.io", Version: "v1", Resource: "inferencepools"}

// poolSource watches one InferencePool and the pods its spec.selector
// picks. When the selector changes, the pod informer is replaced by one
// with the new selector (from the worker goroutine, which owns it).
type poolSource struct {
	k    config.Kubernetes
	w    *watcher
	pods corev1client.PodsGetter
	pool cache.SharedIndexInformer

	// Worker only.
	selector   string // label selector of the running pod informer
	podInf     cache.SharedIndexInformer
	podCancel  context.CancelFunc
	lastReason string // the last reason the pool yielded no set, logged once
}

func newPoolSource(dyn dynamic.Interface, pods corev1client.PodsGetter, k config.Kubernetes, w *watcher) *poolSource {
	// Only the named pool: RBAC can then restrict the Role to that
	// resourceName (list and watch with a metadata.name field selector).
	byName := fields.OneTermEqualSelector("metadata.name", k.InferencePool).String()
	api := dyn.Resource(InferencePoolGVR).Namespace(k.Namespace)
	inf := informerOf(w, api, func(o *metav1.ListOptions) { o.FieldSelector = byName }, &unstructured.Unstructured{})
	return &poolSource{k: k, w: w, pods: pods, pool: inf}
}

func (s *poolSource) run(ctx context.Context) { s.w.runInformer(ctx, s.pool) }

func (s *poolSource) synced() bool { return s.pool.HasSynced() }

// poolSpec is what probegate reads of an InferencePool.
type poolSpec struct {
	selector labels.Selector
	ports    []int
}

// parsePoolSpec reads spec.selector.matchLabels and spec.targetPorts[].number.
func parsePoolSpec(u *unstructured.Unstructured) (poolSpec, error) {
	ml, found, err := unstructured.NestedStringMap(u.Object, "spec", "selector", "matchLabels")
	if err != nil {
		return poolSpec{}, fmt.Errorf("spec.selector.matchLabels: %w", err)
	}
	if !found || len(ml) == 0 {
		return poolSpec{}, errors.New("spec.selector.matchLabels is empty")
	}
	sel, err := labels.ValidatedSelectorFromSet(ml)
	if err != nil {
		return poolSpec{}, fmt.Errorf("spec.selector.matchLabels: %w", err)
	}
	tp, _, err := unstructured.NestedSlice(u.Object, "spec", "targetPorts")
	if err != nil {
		return poolSpec{}, fmt.Errorf("spec.targetPorts: %w", err)
	}
	var ports []int
	for i, e := range tp {
		m, ok := e.(map[string]any)
		if !ok {
			return poolSpec{}, fmt.Errorf("spec.targetPorts[%d] is not an object", i)
		}
		var n int64
		switch v := m["number"].(type) {
		case int64:
			n = v
		case float64:
			n = int64(v)
		case int:
			n = int64(v)
		}
		if n < 1 || n > 65535 {
			return poolSpec{}, fmt.Errorf("spec.targetPorts[%d].number must be in 1..65535", i)
		}
		ports = append(ports, int(n))
	}
	if len(ports) == 0 {
		return poolSpec{}, errors.New("spec.targetPorts is empty")
	}
	return poolSpec{selector: sel, ports: ports}, nil
}

// targets reads the pool, (re)starts the pod informer when the selector
// changed, and lists every serving pod at every target port (or only
// backends.kubernetes.port).
func (s *poolSource) targets(ctx context.Context) []route.Target {
	obj, exists, err := s.pool.GetStore().GetByKey(s.k.Namespace + "/" + s.k.InferencePool)
	if err != nil || !exists {
		s.noSet("InferencePool not found: no backends")
		return nil
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	spec, err := parsePoolSpec(u)
	if err != nil {
		s.noSet("InferencePool is unusable (" + err.Error() + "): no backends")
		return nil
	}
	ports := spec.ports
	if s.k.Port != 0 {
		if !slices.Contains(ports, s.k.Port) {
			s.noSet("InferencePool spec.targetPorts does not list backends.kubernetes.port " + strconv.Itoa(s.k.Port) + ": no backends")
			return nil
		}
		ports = []int{s.k.Port}
	}
	s.lastReason = ""
	if sel := spec.selector.String(); sel != s.selector {
		s.watchPods(ctx, sel)
	}
	var out []route.Target
	for _, o := range s.podInf.GetStore().List() {
		pod, ok := o.(*corev1.Pod)
		if !ok || !podServing(pod) || !spec.selector.Matches(labels.Set(pod.Labels)) {
			continue
		}
		origin := "kubernetes:inferencepool/" + s.k.Namespace + "/" + s.k.InferencePool + " pod/" + pod.Name
		for _, p := range ports {
			out = append(out, route.Target{URL: net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(p)), Origin: origin})
		}
	}
	slices.SortFunc(out, func(a, b route.Target) int { return strings.Compare(a.URL, b.URL) })
	return slices.CompactFunc(out, func(a, b route.Target) bool { return a.URL == b.URL })
}

// noSet logs, once per distinct reason, why the pool yields no backends.
func (s *poolSource) noSet(reason string) {
	if reason != s.lastReason {
		s.lastReason = reason
		s.w.log.Warn().Msg(reason)
	}
}

// watchPods replaces the pod informer by one that lists sel, and waits
// (bounded) for its first list so the set is never computed from an empty
// cache by mistake.
func (s *poolSource) watchPods(ctx context.Context, sel string) {
	if s.podCancel != nil {
		s.podCancel()
	}
	if s.selector != "" {
		s.w.log.Info().Str("from", s.selector).Str("to", sel).Msg("InferencePool selector changed: watching the new pods")
	}
	s.selector = sel
	api := s.pods.Pods(s.k.Namespace)
	inf := informerOf(s.w, api, func(o *metav1.ListOptions) { o.LabelSelector = sel }, &corev1.Pod{})
	pctx, cancel := context.WithCancel(ctx)
	s.podInf, s.podCancel = inf, cancel
	s.w.runInformer(pctx, inf)
	s.w.waitSynced(inf.HasSynced)
}

// podServing is the test the Inference Extension's endpoint picker applies:
// the pod is Ready, not being deleted, and has an IP.
func podServing(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.PodIP == "" {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
