package deploy

import (
	"bufio"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lockserver/lockserver/internal/testenv"
)

// stage is one stage of deploy/Dockerfile, as far as the tests read it.
type stage struct {
	image, name string
	env         []string   // ENV NAME=value, in order
	runs        [][]string // RUN in exec form (JSON); a RUN in shell form is left out
	copies      []copyFrom
	user        string
	expose      []string
	entrypoint  []string
	cmd         []string
}

// copyFrom is a COPY --from=stage.
type copyFrom struct {
	from, chown string
	srcs        []string
	dst         string
}

// readDockerfile reads deploy/Dockerfile's stages. It understands what that
// file uses and fails on what it does not, rather than misread it.
func readDockerfile(t *testing.T) []*stage {
	t.Helper()
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var stages []*stage
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	cont := ""
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || line == "" && cont == "" {
			continue
		}
		if l, ok := strings.CutSuffix(line, `\`); ok {
			cont += l + " "
			continue
		}
		lines = append(lines, cont+line)
		cont = ""
	}
	jsonArgs := func(s string) []string {
		var v []string
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatalf("Dockerfile: %q is not in exec form (a JSON array): %v", s, err)
		}
		return v
	}
	for _, line := range lines {
		instr, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		if strings.ToUpper(instr) == "FROM" {
			f := strings.Fields(rest)
			s := &stage{image: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			}
			stages = append(stages, s)
			continue
		}
		if len(stages) == 0 {
			t.Fatalf("Dockerfile: %q before FROM", line)
		}
		s := stages[len(stages)-1]
		switch strings.ToUpper(instr) {
		case "ENV":
			if !regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=\S*$`).MatchString(rest) {
				t.Fatalf("Dockerfile: ENV %q: the test reads ENV NAME=value only", rest)
			}
			s.env = append(s.env, rest)
		case "RUN":
			if strings.HasPrefix(rest, "[") {
				s.runs = append(s.runs, jsonArgs(rest))
			} else if strings.Contains(rest, "go build") {
				t.Fatalf("Dockerfile: RUN %q: give go build in exec form, which the test runs as written", rest)
			}
		case "COPY":
			c := copyFrom{}
			f := strings.Fields(rest)
			for len(f) > 0 && strings.HasPrefix(f[0], "--") {
				k, v, _ := strings.Cut(strings.TrimPrefix(f[0], "--"), "=")
				switch k {
				case "from":
					c.from = v
				case "chown":
					c.chown = v
				default:
					t.Fatalf("Dockerfile: COPY --%s: unknown to the test", k)
				}
				f = f[1:]
			}
			if c.from != "" {
				c.srcs, c.dst = f[:len(f)-1], f[len(f)-1]
				s.copies = append(s.copies, c)
			}
		case "USER":
			s.user = rest
		case "EXPOSE":
			s.expose = append(s.expose, strings.Fields(rest)...)
		case "ENTRYPOINT":
			s.entrypoint = jsonArgs(rest)
		case "CMD":
			s.cmd = jsonArgs(rest)
		case "WORKDIR", "ARG", "LABEL", "VOLUME":
		default:
			t.Fatalf("Dockerfile: %s: unknown to the test", instr)
		}
	}
	if len(stages) < 2 {
		t.Fatalf("Dockerfile: %d stages, want a build stage and a final one", len(stages))
	}
	return stages
}

// image is the image deploy/Dockerfile builds, as far as this machine can
// build it: the binaries of its go build commands, by the path at which the
// final stage has them.
type image struct {
	final *stage
	bins  map[string]string // path in the image -> the binary here
	// built is every binary the build stage made, by its path there.
	built map[string]string
}

// entrypoint returns the command a container of the image runs, given a
// command and arguments that override the image's, as Kubernetes's command
// and args and compose's entrypoint and command do.
func (im *image) entrypoint(t *testing.T, command, args []string) []string {
	t.Helper()
	argv := im.final.entrypoint
	if command != nil {
		argv = command
	}
	if args != nil {
		argv = append(slices.Clone(argv), args...)
	} else if command == nil {
		argv = append(slices.Clone(argv), im.final.cmd...)
	}
	if len(argv) == 0 {
		t.Fatal("the container runs nothing: no command and no ENTRYPOINT")
	}
	bin, ok := im.bins[argv[0]]
	if !ok {
		t.Fatalf("the container runs %s, which the image's build does not make (it makes %v)", argv[0], im.bins)
	}
	return append([]string{bin}, argv[1:]...)
}

var (
	buildOnce  sync.Once
	buildDir   string // removed by TestMain
	builtImage *image
	buildErr   error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// buildImage runs the go build commands of deploy/Dockerfile's build stage
// as written, with the stage's ENV, in the repository's root (the build
// context), once per test binary.
func buildImage(t *testing.T) *image {
	t.Helper()
	testenv.Long(t)
	stages := readDockerfile(t)
	buildOnce.Do(func() { builtImage, buildErr = build(stages) })
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtImage
}

func build(stages []*stage) (*image, error) {
	dir, err := os.MkdirTemp("", "lockserver-deploy-test-")
	if err != nil {
		return nil, err
	}
	// Every test of the process uses the binaries: TestMain removes them.
	buildDir = dir
	im := &image{final: stages[len(stages)-1], bins: map[string]string{}, built: map[string]string{}}
	byName := map[string]*stage{}
	for _, s := range stages {
		byName[s.name] = s
	}
	for _, c := range im.final.copies {
		from, ok := byName[c.from]
		if !ok {
			return nil, fmt.Errorf("Dockerfile: COPY --from=%s names no stage", c.from)
		}
		for _, run := range from.runs {
			if len(run) < 2 || run[0] != "go" || run[1] != "build" {
				continue
			}
			i := slices.Index(run, "-o")
			if i < 0 || i+1 == len(run) {
				return nil, fmt.Errorf("Dockerfile: %q names no -o output", run)
			}
			out := run[i+1]
			if _, done := im.built[out]; done {
				continue
			}
			here := filepath.Join(dir, path.Base(out))
			argv := slices.Clone(run)
			argv[i+1] = here
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Dir = root
			cmd.Env = append(os.Environ(), from.env...)
			if b, err := cmd.CombinedOutput(); err != nil {
				return nil, fmt.Errorf("Dockerfile's %q: %v\n%s", run, err, b)
			}
			im.built[out] = here
		}
		for _, src := range c.srcs {
			here, ok := im.built[src]
			if !ok {
				continue
			}
			dst := c.dst
			if strings.HasSuffix(dst, "/") || len(c.srcs) > 1 {
				dst = path.Join(dst, path.Base(src))
			}
			im.bins[dst] = here
		}
	}
	return im, nil
}

// The image's binaries are static, built with -trimpath and without cgo as
// the Dockerfile says, and it runs them as a user that is not root.
func TestDockerfile(t *testing.T) {
	im := buildImage(t)
	if len(im.built) == 0 {
		t.Fatal("the Dockerfile's build stage builds nothing the final stage copies")
	}
	for out, bin := range im.built {
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
				t.Errorf("%s has a %v program header: it is linked dynamically, and distroless/static has no libc", out, p.Type)
			}
		}
		f.Close()
		info, err := buildinfo.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		settings := map[string]string{}
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
		if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" {
			t.Errorf("%s was built with CGO_ENABLED=%q and -trimpath=%q, want 0 and true", out, settings["CGO_ENABLED"], settings["-trimpath"])
		}
	}
	for _, want := range []string{"/usr/local/bin/lockserver", "/usr/local/bin/healthcheck"} {
		if _, ok := im.bins[want]; !ok {
			t.Errorf("the image has no %s; it has %v", want, im.bins)
		}
	}
	argv := im.entrypoint(t, nil, []string{"--version"})
	if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "lockserver ") {
		t.Errorf("the entrypoint's --version: %v: %s", err, out)
	}

	final := im.final
	uid, _, _ := strings.Cut(final.user, ":")
	if uid == "" || uid == "0" || uid == "root" {
		t.Errorf("the final stage runs as USER %q, want a user other than root", final.user)
	}
	for _, c := range final.copies {
		if c.chown != "" && c.chown != final.user {
			t.Errorf("COPY --chown=%s, but the server runs as %s: it could not write there", c.chown, final.user)
		}
	}
	for _, port := range []string{"6379", "7000", "9121"} {
		if !slices.Contains(final.expose, port) {
			t.Errorf("the image does not EXPOSE %s (it exposes %v)", port, final.expose)
		}
	}

	// The builder's Go is the one go.mod asks for: an older one would not
	// build the module, a newer one would build it unlike CI does.
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go ([0-9]+\.[0-9]+)`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	builder := readDockerfile(t)[0].image
	if !strings.HasPrefix(builder, "golang:"+string(m[1])+"-") && !strings.HasPrefix(builder, "golang:"+string(m[1])+".") && builder != "golang:"+string(m[1]) {
		t.Errorf("the build stage is FROM %s, want golang:%s (go.mod's go line)", builder, m[1])
	}
}
