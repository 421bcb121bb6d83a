package launcher

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// The parts of the Kubernetes objects the manifests use that the tests
// check, in the API's own field names.
type (
	k8sObject struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec k8sSpec `json:"spec"`
	}
	k8sSpec struct {
		// Service
		ClusterIP                string            `json:"clusterIP"`
		PublishNotReadyAddresses bool              `json:"publishNotReadyAddresses"`
		Selector                 map[string]string `json:"selector"`
		Ports                    []k8sPort         `json:"ports"`
		// Job
		CompletionMode string `json:"completionMode"`
		Completions    int    `json:"completions"`
		Parallelism    int    `json:"parallelism"`
		BackoffLimit   *int   `json:"backoffLimit"`
		Template       struct {
			Spec k8sPodSpec `json:"spec"`
		} `json:"template"`
	}
	k8sPort struct {
		Name          string `json:"name"`
		Port          int    `json:"port"`
		ContainerPort int    `json:"containerPort"`
	}
	k8sPodSpec struct {
		Subdomain     string         `json:"subdomain"`
		RestartPolicy string         `json:"restartPolicy"`
		Containers    []k8sContainer `json:"containers"`
		Volumes       []struct {
			Name   string `json:"name"`
			Secret *struct {
				SecretName  string `json:"secretName"`
				DefaultMode int    `json:"defaultMode"`
			} `json:"secret"`
		} `json:"volumes"`
	}
	k8sContainer struct {
		Image   string    `json:"image"`
		Command []string  `json:"command"`
		Args    []string  `json:"args"`
		Ports   []k8sPort `json:"ports"`
		Env     []struct {
			Name      string `json:"name"`
			Value     string `json:"value"`
			ValueFrom *struct {
				FieldRef struct {
					FieldPath string `json:"fieldPath"`
				} `json:"fieldRef"`
			} `json:"valueFrom"`
		} `json:"env"`
		VolumeMounts []struct {
			Name      string `json:"name"`
			MountPath string `json:"mountPath"`
		} `json:"volumeMounts"`
	}
)

const k8sDir = "../deploy/kubernetes"

// loadManifests parses every document of every manifest: bad YAML, or a
// field of the wrong type, fails the test; fields the structs above do
// not name are not checked.
func loadManifests(t *testing.T) (svc, job k8sObject) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(k8sDir, "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var o k8sObject
			require.NoError(t, yaml.Unmarshal([]byte(doc), &o), "%s document %d", f, i)
			switch o.Kind {
			case "Service":
				svc = o
			case "Job":
				job = o
			default:
				t.Fatalf("%s document %d: unexpected kind %q", f, i, o.Kind)
			}
		}
	}
	require.Equal(t, "v1", svc.APIVersion)
	require.Equal(t, "batch/v1", job.APIVersion)
	return svc, job
}

// The Job and its Service fit together: pod 0 is reachable by the name
// every pod is told, on the port it serves.
func TestKubernetesManifests(t *testing.T) {
	svc, job := loadManifests(t)
	assert.Equal(t, "None", svc.Spec.ClusterIP, "the Service must be headless: pods are reached one by one")
	assert.True(t, svc.Spec.PublishNotReadyAddresses, "pod 0 must be found before it is ready")
	assert.Equal(t, map[string]string{"job-name": job.Metadata.Name}, svc.Spec.Selector)

	js := job.Spec
	assert.Equal(t, "Indexed", js.CompletionMode)
	assert.Equal(t, js.Completions, js.Parallelism, "every node must run at once")
	require.NotNil(t, js.BackoffLimit)
	assert.Zero(t, *js.BackoffLimit, "a failed job is not retried pod by pod")
	pod := js.Template.Spec
	assert.Equal(t, svc.Metadata.Name, pod.Subdomain, "the pods' DNS names come from the Service")
	assert.Equal(t, "Never", pod.RestartPolicy)
	require.Len(t, pod.Containers, 1)
	ctr := pod.Containers[0]
	assert.Equal(t, []string{"cellrun"}, ctr.Command)

	cfg := podConfig(t, job, 0, NewToken())
	assert.Equal(t, js.Completions, cfg.Nodes, "--nnodes and completions differ")
	rdzv := flagValue(t, ctr.Args, "--rdzv-endpoint")
	host, port, ok := strings.Cut(rdzv, ":")
	require.True(t, ok, rdzv)
	assert.Equal(t, job.Metadata.Name+"-0."+svc.Metadata.Name, host, "--rdzv-endpoint is not pod 0's name through the Service")
	require.Len(t, svc.Spec.Ports, 1)
	require.Len(t, ctr.Ports, 1)
	assert.Equal(t, port, strconv.Itoa(svc.Spec.Ports[0].Port))
	assert.Equal(t, port, strconv.Itoa(ctr.Ports[0].ContainerPort))

	// The token comes from a Secret mounted read-only for the pod only.
	join := strings.TrimPrefix(flagValue(t, ctr.Args, "--join"), "@")
	var mounted bool
	for _, m := range ctr.VolumeMounts {
		if filepath.Dir(join) == m.MountPath {
			for _, v := range pod.Volumes {
				if v.Name == m.Name && v.Secret != nil {
					mounted = true
					assert.Zero(t, v.Secret.DefaultMode&0o007, "the token is readable by others: mode %o", v.Secret.DefaultMode)
				}
			}
		}
	}
	assert.True(t, mounted, "--join %s is not in a mounted Secret", join)

	// The image has what the pod runs.
	docker, err := os.ReadFile("../deploy/Dockerfile")
	require.NoError(t, err)
	for _, bin := range []string{"cellrun", filepath.Base(cfg.Program)} {
		assert.Contains(t, string(docker), "-o /out/"+bin+" ", "the image does not build %s", bin)
	}
	assert.Contains(t, string(docker), "COPY --from=build /out/ "+filepath.Dir(cfg.Program)+"/")
}

// Each pod's environment (its completion index, the Job's uid) maps to
// its node of the job: pod 0 serves etcd with a certificate for the name
// the others dial, the others join it.
func TestKubernetesEnvironment(t *testing.T) {
	svc, job := loadManifests(t)
	rdzv := flagValue(t, job.Spec.Template.Spec.Containers[0].Args, "--rdzv-endpoint")
	token := NewToken()
	for index := range job.Spec.Completions {
		cfg := podConfig(t, job, index, token)
		require.NoError(t, cfg.validate(), "pod %d", index)
		assert.Equal(t, index, cfg.NodeRank, "pod %d", index)
		assert.Equal(t, "0c6a9e52-6f7e-4d4b-9b1e-3f1b2a7c9d10", cfg.Job, "pod %d: the job id is the Job's uid", index)
		if index == 0 {
			assert.Equal(t, "0.0.0.0:29400", cfg.EtcdServe)
			assert.Equal(t, job.Metadata.Name+"-0."+svc.Metadata.Name, cfg.serveName)
			assert.Empty(t, cfg.EtcdEndpoints)
		} else {
			assert.Equal(t, []string{rdzv}, cfg.EtcdEndpoints, "pod %d", index)
			assert.Empty(t, cfg.EtcdServe, "pod %d", index)
		}
	}

	// The certificate pod 0 serves is valid for the name the others use.
	cfg := podConfig(t, job, 0, token)
	require.NoError(t, cfg.validate())
	tok, err := parseToken(cfg.JoinToken)
	require.NoError(t, err)
	d, err := writeTLS(tok, true, cfg.serveName)
	require.NoError(t, err)
	defer d.remove()
	b, err := os.ReadFile(d.serverCertFile)
	require.NoError(t, err)
	block, _ := pem.Decode(b)
	require.NotNil(t, block)
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	require.NoError(t, cert.VerifyHostname(cfg.serveName))

	// A completion index that is no index is refused, naming it.
	_, err = ParseArgsEnv([]string{"prog"}, func(k string) (string, bool) {
		if k == EnvCompletionIndex {
			return "one", true
		}
		return "", false
	})
	assert.ErrorContains(t, err, `--node-rank "JOB_COMPLETION_INDEX=\"one\""`)
}

// podConfig is the cellrun configuration of pod index of job: its command
// line with the pod's environment expanded as Kubernetes expands
// $(VAR), and the token in a file of the test's.
func podConfig(t *testing.T, job k8sObject, index int, token string) Config {
	t.Helper()
	ctr := job.Spec.Template.Spec.Containers[0]
	env := map[string]string{
		EnvCompletionIndex: strconv.Itoa(index),
		"HOSTNAME":         job.Metadata.Name + "-" + strconv.Itoa(index),
	}
	fieldRefs := map[string]string{
		"metadata.labels['batch.kubernetes.io/controller-uid']": "0c6a9e52-6f7e-4d4b-9b1e-3f1b2a7c9d10",
		"status.podIP": "10.244.1." + strconv.Itoa(10+index),
	}
	for _, e := range ctr.Env {
		switch {
		case e.ValueFrom != nil:
			v, ok := fieldRefs[e.ValueFrom.FieldRef.FieldPath]
			require.True(t, ok, "env %s: field %s unknown to the test", e.Name, e.ValueFrom.FieldRef.FieldPath)
			env[e.Name] = v
		default:
			env[e.Name] = expandK8s(e.Value, env)
		}
	}
	tokenDir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(tokenDir, "token"), []byte(token+"\n"), 0o400))
	args := make([]string, len(ctr.Args))
	for i, a := range ctr.Args {
		a = expandK8s(a, env)
		if v, ok := strings.CutPrefix(a, "--join=@"); ok {
			a = "--join=@" + filepath.Join(tokenDir, filepath.Base(v))
		}
		args[i] = a
	}
	cfg, err := ParseArgsEnv(args, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err, "pod %d: %v", index, args)
	assert.Equal(t, "10.244.1."+strconv.Itoa(10+index), env["RDMACELL_TCP_ADDR"], "the ranks advertise the pod's address")
	return cfg
}

var k8sVar = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expandK8s expands $(VAR) references to defined variables, as Kubernetes
// does in args and env values; others stay as written.
func expandK8s(s string, env map[string]string) string {
	return k8sVar.ReplaceAllStringFunc(s, func(ref string) string {
		if v, ok := env[ref[2:len(ref)-1]]; ok {
			return v
		}
		return ref
	})
}

// flagValue is the value of --name=value in args.
func flagValue(t *testing.T, args []string, name string) string {
	t.Helper()
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	t.Fatalf("no %s=... in %v", name, args)
	return ""
}
