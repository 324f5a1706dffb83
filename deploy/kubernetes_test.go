package deploy

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/lockserver/lockserver/internal/clustertest"
	"github.com/redis/go-redis/v9"
	"go.yaml.in/yaml/v3"
)

// The parts of the Kubernetes objects the test reads.
type (
	objectMeta struct {
		Name      string            `yaml:"name"`
		Namespace string            `yaml:"namespace"`
		Labels    map[string]string `yaml:"labels"`
	}
	k8sSecret struct {
		Metadata   objectMeta        `yaml:"metadata"`
		StringData map[string]string `yaml:"stringData"`
		Data       map[string]string `yaml:"data"`
	}
	k8sService struct {
		Metadata objectMeta `yaml:"metadata"`
		Spec     struct {
			ClusterIP                string            `yaml:"clusterIP"`
			PublishNotReadyAddresses bool              `yaml:"publishNotReadyAddresses"`
			Selector                 map[string]string `yaml:"selector"`
		} `yaml:"spec"`
	}
	k8sPDB struct {
		Metadata objectMeta `yaml:"metadata"`
		Spec     struct {
			MaxUnavailable intOrString `yaml:"maxUnavailable"`
			Selector       struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"selector"`
		} `yaml:"spec"`
	}
	k8sStatefulSet struct {
		Metadata objectMeta `yaml:"metadata"`
		Spec     struct {
			ServiceName         string `yaml:"serviceName"`
			Replicas            int    `yaml:"replicas"`
			PodManagementPolicy string `yaml:"podManagementPolicy"`
			Selector            struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"selector"`
			Template struct {
				Metadata objectMeta `yaml:"metadata"`
				Spec     struct {
					EnableServiceLinks *bool `yaml:"enableServiceLinks"`
					SecurityContext    struct {
						RunAsNonRoot bool `yaml:"runAsNonRoot"`
					} `yaml:"securityContext"`
					Containers []k8sContainer `yaml:"containers"`
					Volumes    []struct {
						Name string `yaml:"name"`
					} `yaml:"volumes"`
				} `yaml:"spec"`
			} `yaml:"template"`
			VolumeClaimTemplates []struct {
				Metadata objectMeta `yaml:"metadata"`
			} `yaml:"volumeClaimTemplates"`
		} `yaml:"spec"`
	}
	k8sContainer struct {
		Name    string   `yaml:"name"`
		Command []string `yaml:"command"`
		Args    []string `yaml:"args"`
		Env     []struct {
			Name      string `yaml:"name"`
			Value     string `yaml:"value"`
			ValueFrom *struct {
				FieldRef *struct {
					FieldPath string `yaml:"fieldPath"`
				} `yaml:"fieldRef"`
				SecretKeyRef *struct {
					Name string `yaml:"name"`
					Key  string `yaml:"key"`
				} `yaml:"secretKeyRef"`
			} `yaml:"valueFrom"`
		} `yaml:"env"`
		EnvFrom []any `yaml:"envFrom"`
		Ports   []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		ReadinessProbe  *k8sProbe `yaml:"readinessProbe"`
		LivenessProbe   *k8sProbe `yaml:"livenessProbe"`
		SecurityContext struct {
			ReadOnlyRootFilesystem bool `yaml:"readOnlyRootFilesystem"`
		} `yaml:"securityContext"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
		} `yaml:"volumeMounts"`
	}
	k8sProbe struct {
		HTTPGet *struct {
			Path string      `yaml:"path"`
			Port intOrString `yaml:"port"`
		} `yaml:"httpGet"`
	}
)

// intOrString is Kubernetes's IntOrString, kept as written.
type intOrString string

func (v *intOrString) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a number or a name", n.Line)
	}
	*v = intOrString(n.Value)
	return nil
}

// k8sObjects are the objects of deploy/kubernetes, by kind.
type k8sObjects struct {
	secrets      []k8sSecret
	services     []k8sService
	pdbs         []k8sPDB
	statefulSets []k8sStatefulSet
}

func readKubernetes(t *testing.T) k8sObjects {
	t.Helper()
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in deploy/kubernetes: %v", err)
	}
	var objs k8sObjects
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(f)
		for {
			var doc yaml.Node
			err := dec.Decode(&doc)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			var head struct {
				Kind     string     `yaml:"kind"`
				Metadata objectMeta `yaml:"metadata"`
			}
			if err := doc.Decode(&head); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if head.Metadata.Namespace != "" {
				t.Errorf("%s: %s %s names namespace %s: leave it to kubectl -n", file, head.Kind, head.Metadata.Name, head.Metadata.Namespace)
			}
			var into any
			switch head.Kind {
			case "Secret":
				objs.secrets = append(objs.secrets, k8sSecret{})
				into = &objs.secrets[len(objs.secrets)-1]
			case "Service":
				objs.services = append(objs.services, k8sService{})
				into = &objs.services[len(objs.services)-1]
			case "PodDisruptionBudget":
				objs.pdbs = append(objs.pdbs, k8sPDB{})
				into = &objs.pdbs[len(objs.pdbs)-1]
			case "StatefulSet":
				objs.statefulSets = append(objs.statefulSets, k8sStatefulSet{})
				into = &objs.statefulSets[len(objs.statefulSets)-1]
			default:
				t.Fatalf("%s: a %s, which the test does not know", file, head.Kind)
			}
			if err := doc.Decode(into); err != nil {
				t.Fatalf("%s: %s: %v", file, head.Kind, err)
			}
		}
		f.Close()
	}
	return objs
}

// kubeletExpand expands $(NAME) in s as the kubelet expands a container's
// command, args and env values: to the variable's value when it is defined,
// left as written when it is not; $$ is a literal $.
func kubeletExpand(s string, vars map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// The kubelet's expansion, on the examples of the Kubernetes documentation
// ("Define dependent environment variables").
func TestKubeletExpand(t *testing.T) {
	vars := map[string]string{"SERVICE_PORT": "80", "EMPTY": ""}
	for in, want := range map[string]string{
		"$(SERVICE_PORT)":          "80",
		"http://x:$(SERVICE_PORT)": "http://x:80",
		"$(UNDEFINED)":             "$(UNDEFINED)",
		"$$(SERVICE_PORT)":         "$(SERVICE_PORT)",
		"a$(EMPTY)b":               "ab",
		"$(SERVICE_PORT":           "$(SERVICE_PORT",
		"100$":                     "100$",
		"$x":                       "$x",
	} {
		if got := kubeletExpand(in, vars); got != want {
			t.Errorf("kubeletExpand(%q) = %q, want %q", in, got, want)
		}
	}
}

// pod is what one pod of the StatefulSet runs.
type pod struct {
	name string
	argv []string
	env  []string
}

// podRun returns what the kubelet runs in pod ordinal of set in namespace
// ns: the container's command and args, and its environment, expanded.
func podRun(t *testing.T, objs k8sObjects, set k8sStatefulSet, c k8sContainer, im *image, ns string, ordinal int) pod {
	t.Helper()
	p := pod{name: fmt.Sprintf("%s-%d", set.Metadata.Name, ordinal)}
	if len(c.EnvFrom) > 0 {
		t.Fatal("the container has envFrom, which the test does not read")
	}
	vars := map[string]string{}
	// The runtime sets HOSTNAME to the pod's name.
	p.env = []string{"HOSTNAME=" + p.name}
	for _, e := range c.Env {
		v := kubeletExpand(e.Value, vars)
		switch from := e.ValueFrom; {
		case from == nil:
		case from.FieldRef != nil:
			switch from.FieldRef.FieldPath {
			case "metadata.name":
				v = p.name
			case "metadata.namespace":
				v = ns
			default:
				t.Fatalf("env %s: fieldRef %s, which the test does not give", e.Name, from.FieldRef.FieldPath)
			}
		case from.SecretKeyRef != nil:
			v = secretValue(t, objs, from.SecretKeyRef.Name, from.SecretKeyRef.Key)
		default:
			t.Fatalf("env %s: a valueFrom the test does not read", e.Name)
		}
		vars[e.Name] = v
		p.env = append(p.env, e.Name+"="+v)
	}
	expand := func(ss []string) []string {
		if ss == nil {
			return nil
		}
		out := []string{}
		for _, s := range ss {
			out = append(out, kubeletExpand(s, vars))
		}
		return out
	}
	p.argv = im.entrypoint(t, expand(c.Command), expand(c.Args))
	return p
}

func secretValue(t *testing.T, objs k8sObjects, name, key string) string {
	t.Helper()
	for _, s := range objs.secrets {
		if s.Metadata.Name != name {
			continue
		}
		if v, ok := s.StringData[key]; ok {
			return v
		}
		if v, ok := s.Data[key]; ok {
			b, err := base64.StdEncoding.DecodeString(v)
			if err != nil {
				t.Fatalf("Secret %s: data %s: %v", name, key, err)
			}
			return string(b)
		}
		t.Fatalf("Secret %s has no key %s: the pod would not start", name, key)
	}
	t.Fatalf("no Secret %s in the manifests: the pod would not start", name)
	return ""
}

func sameLabels(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return len(selector) > 0
}

// The StatefulSet's pods, each running exactly the arguments and environment
// that the manifest gives it, form a cluster, serve a write through any
// member, and answer their probes. The pods' DNS names are mapped to
// loopback addresses, one per pod, where the test writes them.
func TestKubernetes(t *testing.T) {
	objs := readKubernetes(t)
	if len(objs.statefulSets) != 1 {
		t.Fatalf("%d StatefulSets in deploy/kubernetes, want 1", len(objs.statefulSets))
	}
	set := objs.statefulSets[0]
	spec := set.Spec
	podLabels := spec.Template.Metadata.Labels
	if !sameLabels(spec.Selector.MatchLabels, podLabels) {
		t.Errorf("the StatefulSet's selector %v does not select its pods %v", spec.Selector.MatchLabels, podLabels)
	}
	var headless *k8sService
	for i, s := range objs.services {
		if s.Metadata.Name == spec.ServiceName {
			headless = &objs.services[i]
		}
		if !sameLabels(s.Spec.Selector, podLabels) {
			t.Errorf("Service %s selects %v, not the StatefulSet's pods %v", s.Metadata.Name, s.Spec.Selector, podLabels)
		}
	}
	switch {
	case headless == nil:
		t.Errorf("no Service %s, the StatefulSet's serviceName: its pods would have no DNS names", spec.ServiceName)
	case headless.Spec.ClusterIP != "None":
		t.Errorf("Service %s has clusterIP %q, want None: the pods' names come from a headless Service", spec.ServiceName, headless.Spec.ClusterIP)
	case !headless.Spec.PublishNotReadyAddresses:
		t.Errorf("Service %s does not publish not-ready addresses: no member is ready before a leader is elected, and none could reach another to elect one", spec.ServiceName)
	}
	if spec.PodManagementPolicy != "Parallel" {
		t.Errorf("podManagementPolicy %q, want Parallel: with OrderedReady the second pod waits for the first to be ready, which needs a majority", spec.PodManagementPolicy)
	}
	if spec.Replicas != 3 {
		t.Errorf("replicas %d, want 3", spec.Replicas)
	}
	if sl := spec.Template.Spec.EnableServiceLinks; sl == nil || *sl {
		t.Error("enableServiceLinks is not false: the kubelet would set a LOCKSERVER_*_PORT variable for a Service named lockserver-*, which the server may read as a flag")
	}
	if !spec.Template.Spec.SecurityContext.RunAsNonRoot {
		t.Error("the pod's securityContext does not say runAsNonRoot")
	}
	if len(objs.pdbs) != 1 || objs.pdbs[0].Spec.MaxUnavailable != "1" || !sameLabels(objs.pdbs[0].Spec.Selector.MatchLabels, podLabels) {
		t.Errorf("want one PodDisruptionBudget of the pods with maxUnavailable 1: %+v", objs.pdbs)
	}
	if len(spec.Template.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(spec.Template.Spec.Containers))
	}
	c := spec.Template.Spec.Containers[0]
	if !c.SecurityContext.ReadOnlyRootFilesystem {
		t.Error("the container's root file system is not read-only")
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("the readiness probe is not an HTTP GET of /readyz: %+v", c.ReadinessProbe)
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("the liveness probe is not an HTTP GET of /healthz: %+v", c.LivenessProbe)
	}
	if t.Failed() {
		return
	}

	im := buildImage(t)
	const ns = "locks"
	pods := make([]pod, spec.Replicas)
	var listen []string
	for i := range pods {
		pods[i] = podRun(t, objs, set, c, im, ns, i)
		listen = append(listen, listenPorts(pods[i].argv)...)
	}
	checkEnvNames(t, im.bins[im.final.entrypoint[0]], pods[0].env, "the StatefulSet")
	// Each pod's address, and then each pod's own loopback.
	ips := loopbacks(t, 11, 2*len(pods), listen)

	// The pods' full names, as the manifest writes them, resolve to their
	// addresses; a name written otherwise would fail the test.
	hosts := map[string]string{}
	for i, p := range pods {
		hosts[p.name+"."+spec.ServiceName+"."+ns+".svc.cluster.local"] = ips[i]
	}
	claims := map[string]bool{}
	for _, v := range spec.VolumeClaimTemplates {
		claims[v.Metadata.Name] = true
	}
	clients := map[string]*redis.Client{}
	var procs []*member
	// run is pod i's command line and environment, on new volumes.
	run := func(i int) (argv, env []string) {
		own := map[string]string{"0.0.0.0": ips[i], "127.0.0.1": ips[len(pods)+i]}
		for k, v := range hosts {
			own[k] = v
		}
		mounts := map[string]string{}
		for _, vm := range c.VolumeMounts {
			if !claims[vm.Name] {
				t.Fatalf("volume %s is no volumeClaimTemplate: the test gives none other", vm.Name)
			}
			mounts[vm.MountPath] = t.TempDir()
		}
		for _, a := range pods[i].argv {
			argv = append(argv, mapPath(mapHosts(t, a, own), mounts))
		}
		for _, kv := range pods[i].env {
			env = append(env, mapPath(mapHosts(t, kv, own), mounts))
		}
		return argv, env
	}
	for i, p := range pods {
		argv, env := run(i)
		id, ok := flagValue(argv, "node-id")
		if !ok {
			id = getEnv(env, "LOCKSERVER_NODE_ID")
		}
		if id != p.name {
			t.Fatalf("pod %s runs as member %q, want its pod name", p.name, id)
		}
		addr, ok := flagValue(argv, "advertise-addr")
		if !ok {
			t.Fatalf("pod %s has no --advertise-addr, the address its clients are given", p.name)
		}
		procs = append(procs, startMember(t, p.name, argv, env))
		clients[id] = client(t, addr, getEnv(env, "LOCKSERVER_PASSWORD"), nil)
	}

	leader := waitCluster(t, clients, procs)
	checkWrite(t, clients, leader)
	for i := range pods {
		for _, probe := range []*k8sProbe{c.ReadinessProbe, c.LivenessProbe} {
			port := string(probe.HTTPGet.Port)
			if _, err := strconv.Atoi(port); err != nil {
				port = ""
				for _, cp := range c.Ports {
					if cp.Name == string(probe.HTTPGet.Port) {
						port = strconv.Itoa(cp.ContainerPort)
					}
				}
				if port == "" {
					t.Fatalf("the probe's port %s is none of the container's", probe.HTTPGet.Port)
				}
			}
			checkHTTP(t, "http://"+ips[i]+":"+port+probe.HTTPGet.Path)
		}
	}

	// A pod whose volume is lost starts again, with the same arguments, on
	// a new one: it joins the cluster rather than bootstrap it again, and
	// gets its data.
	lost := len(pods) - 1
	// Once it has run as a member: registered its client address.
	clustertest.Eventually(t, pods[lost].name+" to register", func() error {
		v, err := clients[leader].Do(context.Background(), "LOCKSERVER", "MEMBERS").Result()
		if err != nil {
			return err
		}
		for _, m := range v.([]any) {
			if m := m.(map[any]any); m["id"] == pods[lost].name && m["client"] != "" {
				return nil
			}
		}
		return fmt.Errorf("%s has not registered: %v", pods[lost].name, v)
	})
	procs[lost].stop(t)
	argv, env := run(lost)
	procs[lost] = startMember(t, pods[lost].name, argv, env)
	waitCluster(t, clients, procs)
	clustertest.Eventually(t, "GET on "+pods[lost].name+" after it lost its volume", func() error {
		got, err := clients[pods[lost].name].Get(context.Background(), "deploy-test").Result()
		if err == nil && !strings.HasPrefix(got, "written-through-") {
			t.Fatalf("GET on %s after it lost its volume = %q", pods[lost].name, got)
		}
		return err
	})
	log, _ := os.ReadFile(procs[lost].log)
	if !strings.Contains(string(log), "rather than bootstrap again") {
		t.Fatalf("%s, with no data, did not join through another member", pods[lost].name)
	}
	for _, m := range procs {
		m.stop(t)
	}
}
