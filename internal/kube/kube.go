// Package kube discovers probegate's backends by watching the Kubernetes
// API with client-go informers (no polling): a Service's EndpointSlices
// (backends.kubernetes.service) or the pods an InferencePool selects
// (backends.kubernetes.inference_pool, read through the dynamic client).
//
// Start implements route.Discover. Every change that reaches an informer
// recomputes the whole set from the informers' caches and publishes it when
// it differs, so an endpoint that turns not-ready or terminating leaves the
// pool (and drains) within the event's delivery, before its pod dies. A lost
// API connection keeps the last set: the informers' caches are not cleared,
// and the loss and the recovery are each logged once.
package kube

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/rs/zerolog"
	"k8s.io/client-go/dynamic"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	discoveryv1client "k8s.io/client-go/kubernetes/typed/discovery/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/probegate/probegate/internal/config"
	"github.com/probegate/probegate/route"
)

var _ route.Discover = Start

// Clients are the API clients discovery reads through: EndpointSlices for a
// Service, InferencePools (dynamic) and Pods for a pool. Tests pass
// client-go's fakes.
type Clients struct {
	EndpointSlices discoveryv1client.EndpointSlicesGetter
	Pods           corev1client.PodsGetter
	Dynamic        dynamic.Interface
	// Root, when set, is the clientset the typed clients came from. The
	// informers ask it whether it supports streaming lists (client-go's
	// fake clientset says no, and its informers then list, then watch).
	Root any
}

// SyncTimeout bounds how long Start waits for the first list, so that a
// proxy whose API server is unreachable still starts (with no backends,
// joining them as soon as the API answers).
const SyncTimeout = 10 * time.Second

var quietKlog sync.Once

// inClusterNamespace is where a pod's service account namespace is mounted.
const inClusterNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Start connects to the API (the in-cluster service account, or k.Kubeconfig)
// and starts watching the backends k describes. See route.Discover.
func Start(k config.Kubernetes, log zerolog.Logger, publish func([]route.Target)) ([]route.Target, func(), error) {
	// client-go logs through klog, its reflectors once per failed retry;
	// the watcher logs each transition once instead.
	quietKlog.Do(func() { klog.SetLogger(logr.Discard()) })
	rc, ns, err := restConfig(k)
	if err != nil {
		return nil, nil, err
	}
	rc.UserAgent = "probegate"
	var cl Clients
	if k.Service != "" {
		c, err := discoveryv1client.NewForConfig(rc)
		if err != nil {
			return nil, nil, fmt.Errorf("backends.kubernetes: %w", err)
		}
		cl.EndpointSlices = c
	} else {
		c, err := corev1client.NewForConfig(rc)
		if err != nil {
			return nil, nil, fmt.Errorf("backends.kubernetes: %w", err)
		}
		d, err := dynamic.NewForConfig(rc)
		if err != nil {
			return nil, nil, fmt.Errorf("backends.kubernetes: %w", err)
		}
		cl.Pods, cl.Dynamic = c, d
	}
	k.Namespace = ns
	return StartWith(cl, k, log, publish, SyncTimeout)
}

// restConfig returns the API connection and the namespace to watch.
func restConfig(k config.Kubernetes) (*rest.Config, string, error) {
	if k.Kubeconfig != "" {
		cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: k.Kubeconfig}, &clientcmd.ConfigOverrides{})
		rc, err := cc.ClientConfig()
		if err != nil {
			return nil, "", fmt.Errorf("backends.kubernetes.kubeconfig: %w", err)
		}
		ns := k.Namespace
		if ns == "" {
			if ns, _, err = cc.Namespace(); err != nil || ns == "" {
				ns = "default"
			}
		}
		return rc, ns, nil
	}
	rc, err := rest.InClusterConfig()
	if err != nil {
		if errors.Is(err, rest.ErrNotInCluster) {
			return nil, "", errors.New("backends.kubernetes: not running in a cluster (no service account); set backends.kubernetes.kubeconfig")
		}
		return nil, "", fmt.Errorf("backends.kubernetes: in-cluster config: %w", err)
	}
	ns := k.Namespace
	if ns == "" {
		ns = "default"
		if b, err := os.ReadFile(inClusterNamespace); err == nil && strings.TrimSpace(string(b)) != "" {
			ns = strings.TrimSpace(string(b))
		}
	}
	return rc, ns, nil
}

// StartWith is Start over the given clients, waiting at most syncTimeout
// for the first list. k.Namespace must be set.
func StartWith(cl Clients, k config.Kubernetes, log zerolog.Logger, publish func([]route.Target), syncTimeout time.Duration) ([]route.Target, func(), error) {
	if k.Namespace == "" {
		k.Namespace = "default"
	}
	w := newWatcher(k, log, publish)
	w.root = cl.Root
	if w.root == nil {
		w.root = cl.Dynamic // the fake dynamic client answers for itself
	}
	var src source
	switch {
	case k.Service != "" && cl.EndpointSlices != nil:
		src = newSliceSource(cl.EndpointSlices, k, w)
	case k.InferencePool != "" && cl.Dynamic != nil && cl.Pods != nil:
		src = newPoolSource(cl.Dynamic, cl.Pods, k, w)
	default:
		return nil, nil, errors.New("backends.kubernetes: no client for the configured source")
	}
	initial := w.start(src, syncTimeout)
	return initial, w.stop, nil
}
