package main

// deploy/k8s/serve.yaml: each document decoded strictly (a misspelt field
// fails here, not on the cluster), and checked against what skynet serve
// does: its flags, its probes' answers, its drain.

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/skynetml/skynet/serve"
)

const k8sServe = "../../deploy/k8s/serve.yaml"

type k8sSelector struct {
	MatchLabels map[string]string `yaml:"matchLabels"`
}

type k8sDeployment struct {
	APIVersion string      `yaml:"apiVersion"`
	Kind       string      `yaml:"kind"`
	Metadata   k8sMetadata `yaml:"metadata"`
	Spec       struct {
		Replicas *int        `yaml:"replicas"`
		Selector k8sSelector `yaml:"selector"`
		Template struct {
			Metadata k8sMetadata `yaml:"metadata"`
			Spec     struct {
				TerminationGracePeriodSeconds *int           `yaml:"terminationGracePeriodSeconds"`
				Containers                    []k8sContainer `yaml:"containers"`
				Volumes                       []k8sVolume    `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type k8sService struct {
	APIVersion string      `yaml:"apiVersion"`
	Kind       string      `yaml:"kind"`
	Metadata   k8sMetadata `yaml:"metadata"`
	Spec       struct {
		Selector map[string]string `yaml:"selector"`
		Ports    []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort any    `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

type k8sPDB struct {
	APIVersion string      `yaml:"apiVersion"`
	Kind       string      `yaml:"kind"`
	Metadata   k8sMetadata `yaml:"metadata"`
	Spec       struct {
		MinAvailable   *int        `yaml:"minAvailable"`
		MaxUnavailable *int        `yaml:"maxUnavailable"`
		Selector       k8sSelector `yaml:"selector"`
	} `yaml:"spec"`
}

type k8sHPA struct {
	APIVersion string      `yaml:"apiVersion"`
	Kind       string      `yaml:"kind"`
	Metadata   k8sMetadata `yaml:"metadata"`
	Spec       struct {
		ScaleTargetRef struct {
			APIVersion string `yaml:"apiVersion"`
			Kind       string `yaml:"kind"`
			Name       string `yaml:"name"`
		} `yaml:"scaleTargetRef"`
		MinReplicas *int `yaml:"minReplicas"`
		MaxReplicas int  `yaml:"maxReplicas"`
		Metrics     []struct {
			Type     string `yaml:"type"`
			Resource *struct {
				Name   string `yaml:"name"`
				Target struct {
					Type               string `yaml:"type"`
					AverageUtilization *int   `yaml:"averageUtilization"`
				} `yaml:"target"`
			} `yaml:"resource"`
		} `yaml:"metrics"`
	} `yaml:"spec"`
}

// strictDocs decodes each YAML document of path into the value want
// returns for its kind, rejecting fields the value does not have.
func strictDocs(t *testing.T, path string, want func(kind string) any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	for i, doc := range bytes.Split(raw, []byte("\n---\n")) {
		var head struct {
			Kind string `yaml:"kind"`
		}
		require.NoError(t, yaml.Unmarshal(doc, &head), "document %d", i+1)
		v := want(head.Kind)
		require.NotNil(t, v, "document %d: kind %q is not one the manifest should hold", i+1, head.Kind)
		dec := yaml.NewDecoder(bytes.NewReader(doc))
		dec.KnownFields(true)
		require.NoError(t, dec.Decode(v), "document %d (%s): a field the test does not know is a misspelling or needs adding", i+1, head.Kind)
		require.ErrorIs(t, dec.Decode(new(any)), io.EOF)
	}
}

// subset reports whether every label of sel is in labels.
func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return len(sel) > 0
}

func TestDeployK8sServe(t *testing.T) {
	var deps []*k8sDeployment
	var svcs []*k8sService
	var pdbs []*k8sPDB
	var hpas []*k8sHPA
	strictDocs(t, k8sServe, func(kind string) any {
		switch kind {
		case "Deployment":
			deps = append(deps, new(k8sDeployment))
			return deps[len(deps)-1]
		case "Service":
			svcs = append(svcs, new(k8sService))
			return svcs[len(svcs)-1]
		case "PodDisruptionBudget":
			pdbs = append(pdbs, new(k8sPDB))
			return pdbs[len(pdbs)-1]
		case "HorizontalPodAutoscaler":
			hpas = append(hpas, new(k8sHPA))
			return hpas[len(hpas)-1]
		}
		return nil
	})
	require.Len(t, deps, 1)
	require.Len(t, svcs, 1)
	require.Len(t, pdbs, 1)
	require.Len(t, hpas, 1)
	dep, svc, pdb, hpa := deps[0], svcs[0], pdbs[0], hpas[0]

	// The Deployment: skynet serve with flags it has, on the pod's port.
	assert.Equal(t, "apps/v1", dep.APIVersion)
	podLabels := dep.Spec.Template.Metadata.Labels
	assert.True(t, subset(dep.Spec.Selector.MatchLabels, podLabels), "the selector matches the pods")
	pod := dep.Spec.Template.Spec
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	argv := append(append([]string{}, c.Command...), c.Args...)
	require.GreaterOrEqual(t, len(argv), 2)
	assert.Equal(t, "skynet", filepath.Base(argv[0]))
	assert.Equal(t, "serve", argv[1])
	var help bytes.Buffer
	run([]string{"serve", "-h"}, &help, &help)
	for _, a := range argv[2:] {
		if name, ok := strings.CutPrefix(a, "--"); ok {
			name, _, _ = strings.Cut(name, "=")
			assert.Contains(t, help.String(), "-"+name+" ", "skynet serve has no flag --%s", name)
		}
	}
	_, ok := flagValue(argv, "--metric")
	assert.True(t, ok, "--metric")
	listen, ok := flagValue(argv, "--listen")
	require.True(t, ok, "--listen: the default is loopback, out of reach of the Service")
	host, port, err := net.SplitHostPort(listen)
	require.NoError(t, err)
	assert.Contains(t, []string{"", "0.0.0.0", "::"}, host, "listen beyond the pod's loopback")
	require.Len(t, c.Ports, 1)
	assert.Equal(t, port, strconv.Itoa(c.Ports[0].ContainerPort), "containerPort is --listen's port")
	portOK := func(p any) bool { // a probe's or the Service's port: the number or the name
		switch v := p.(type) {
		case int:
			return strconv.Itoa(v) == port
		case string:
			return v == c.Ports[0].Name || v == port
		}
		return false
	}
	procs, ok := flagValue(argv, "--processes")
	require.True(t, ok, "--processes: without it a pod starts one worker per core of the node")
	assert.Equal(t, procs, c.Resources.Requests["cpu"], "requests.cpu = --processes")
	assert.NotEmpty(t, c.Resources.Requests["memory"])
	drain, ok := flagValue(argv, "--drain-timeout")
	require.True(t, ok, "--drain-timeout, so the grace period can be set above it")
	d, err := time.ParseDuration(drain)
	require.NoError(t, err)
	require.NotNil(t, pod.TerminationGracePeriodSeconds)
	require.NotNil(t, c.ReadinessProbe)
	require.NotNil(t, c.LivenessProbe)
	assert.Greater(t, time.Duration(*pod.TerminationGracePeriodSeconds)*time.Second, d+time.Duration(c.ReadinessProbe.PeriodSeconds)*time.Second,
		"the grace period outlasts the drain, or Kubernetes kills a pod mid-answer")
	metricPath, _ := flagValue(argv, "--metric")
	for _, p := range []string{argv[0], metricPath} {
		mounted := false
		for _, m := range c.VolumeMounts {
			mounted = mounted || strings.HasPrefix(p, strings.TrimSuffix(m.MountPath, "/")+"/")
		}
		assert.True(t, mounted, "%s is not on a mounted volume", p)
	}

	// The probes ask what skynet serve answers: readiness 503 while the
	// metric loads and while draining; liveness 200 through both.
	rp, lp := c.ReadinessProbe.HTTPGet, c.LivenessProbe.HTTPGet
	require.NotNil(t, rp)
	require.NotNil(t, lp)
	assert.True(t, portOK(rp.Port), "readiness port")
	assert.True(t, portOK(lp.Port), "liveness port")
	s := serve.NewLoading(serve.Options{Token: "secret"}) // probes carry no token
	probe := func(path string) int {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		return w.Code
	}
	assert.Equal(t, http.StatusServiceUnavailable, probe(rp.Path), "readiness while loading")
	assert.Equal(t, http.StatusOK, probe(lp.Path), "liveness while loading: a slow import must not restart the pod")
	s.Drain()
	assert.Equal(t, http.StatusServiceUnavailable, probe(rp.Path), "readiness while draining")
	assert.Equal(t, http.StatusOK, probe(lp.Path), "liveness while draining")

	// The Service reaches the pods' port.
	assert.Equal(t, "v1", svc.APIVersion)
	assert.True(t, subset(svc.Spec.Selector, podLabels), "the Service selects the pods")
	require.Len(t, svc.Spec.Ports, 1)
	assert.True(t, portOK(svc.Spec.Ports[0].TargetPort), "the Service's targetPort is the container's")

	// The budget and the autoscaler: evictions possible, one server left.
	assert.Equal(t, "policy/v1", pdb.APIVersion)
	assert.True(t, subset(pdb.Spec.Selector.MatchLabels, podLabels), "the budget selects the pods")
	require.NotNil(t, pdb.Spec.MinAvailable)
	assert.GreaterOrEqual(t, *pdb.Spec.MinAvailable, 1)
	assert.Equal(t, "autoscaling/v2", hpa.APIVersion)
	ref := hpa.Spec.ScaleTargetRef
	assert.Equal(t, [3]string{"apps/v1", "Deployment", dep.Metadata.Name}, [3]string{ref.APIVersion, ref.Kind, ref.Name})
	require.NotNil(t, hpa.Spec.MinReplicas)
	assert.Greater(t, *hpa.Spec.MinReplicas, *pdb.Spec.MinAvailable, "a node drain can evict a pod")
	assert.GreaterOrEqual(t, hpa.Spec.MaxReplicas, *hpa.Spec.MinReplicas)
	require.NotNil(t, dep.Spec.Replicas)
	assert.Equal(t, *hpa.Spec.MinReplicas, *dep.Spec.Replicas, "replicas start where the autoscaler's floor is")
	require.Len(t, hpa.Spec.Metrics, 1)
	m := hpa.Spec.Metrics[0]
	require.NotNil(t, m.Resource)
	assert.Equal(t, "cpu", m.Resource.Name)
	require.NotNil(t, m.Resource.Target.AverageUtilization)
}
