package lua51

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/yuin/gopher-lua/ast"
)

// Parse builds gopher-lua's AST, whose types gopher-lua may change in any
// release: these tests pin the front end to the release it was written
// against, so that a version bump that changes the AST fails here, loudly,
// rather than as a script that compiles to something else.

// pinnedGopherLua is the gopher-lua release whose AST testdata/ast holds.
const pinnedGopherLua = "v1.1.2"

// astTypes are the types of gopher-lua's ast package that a parsed chunk is
// made of, and for the nodes, whether Parse produces them.
var astTypes = []struct {
	typ      reflect.Type
	produced bool // a node Parse builds; false for those it never does, and for the types that are not nodes
}{
	{reflect.TypeFor[ast.PositionHolder](), false},
	{reflect.TypeFor[ast.Node](), false},
	{reflect.TypeFor[ast.Expr](), false},
	{reflect.TypeFor[ast.ExprBase](), false},
	{reflect.TypeFor[ast.ConstExpr](), false},
	{reflect.TypeFor[ast.ConstExprBase](), false},
	{reflect.TypeFor[ast.Stmt](), false},
	{reflect.TypeFor[ast.StmtBase](), false},
	{reflect.TypeFor[ast.Field](), false},
	{reflect.TypeFor[ast.ParList](), false},
	{reflect.TypeFor[ast.FuncName](), false},
	{reflect.TypeFor[ast.TrueExpr](), true},
	{reflect.TypeFor[ast.FalseExpr](), true},
	{reflect.TypeFor[ast.NilExpr](), true},
	{reflect.TypeFor[ast.NumberExpr](), true},
	{reflect.TypeFor[ast.StringExpr](), true},
	{reflect.TypeFor[ast.Comma3Expr](), true},
	{reflect.TypeFor[ast.IdentExpr](), true},
	{reflect.TypeFor[ast.AttrGetExpr](), true},
	{reflect.TypeFor[ast.TableExpr](), true},
	{reflect.TypeFor[ast.FuncCallExpr](), true},
	{reflect.TypeFor[ast.LogicalOpExpr](), true},
	{reflect.TypeFor[ast.RelationalOpExpr](), true},
	{reflect.TypeFor[ast.StringConcatOpExpr](), false}, // a .. b is a call of the concat helper
	{reflect.TypeFor[ast.ArithmeticOpExpr](), true},
	{reflect.TypeFor[ast.UnaryMinusOpExpr](), true},
	{reflect.TypeFor[ast.UnaryNotOpExpr](), true},
	{reflect.TypeFor[ast.UnaryLenOpExpr](), true},
	{reflect.TypeFor[ast.FunctionExpr](), true},
	{reflect.TypeFor[ast.AssignStmt](), true},
	{reflect.TypeFor[ast.LocalAssignStmt](), true},
	{reflect.TypeFor[ast.FuncCallStmt](), true},
	{reflect.TypeFor[ast.DoBlockStmt](), true},
	{reflect.TypeFor[ast.WhileStmt](), true},
	{reflect.TypeFor[ast.RepeatStmt](), true},
	{reflect.TypeFor[ast.IfStmt](), true},
	{reflect.TypeFor[ast.NumberForStmt](), true},
	{reflect.TypeFor[ast.GenericForStmt](), true},
	{reflect.TypeFor[ast.FuncDefStmt](), true},
	{reflect.TypeFor[ast.ReturnStmt](), true},
	{reflect.TypeFor[ast.BreakStmt](), true},
	{reflect.TypeFor[ast.LabelStmt](), false}, // Lua 5.1 has no labels
	{reflect.TypeFor[ast.GotoStmt](), false},  // nor goto, which is a name
}

// The module requires the gopher-lua release the AST was pinned at. (A test
// binary carries no dependency versions in its build information, so
// go.mod is read.)
func TestGopherLuaIsThePinnedVersion(t *testing.T) {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for ; !fileExists(filepath.Join(dir, "go.mod")); dir = filepath.Dir(dir) {
		if dir == filepath.Dir(dir) {
			t.Fatal("no go.mod above the package")
		}
	}
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var required []string
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		if strings.Contains(line, "github.com/yuin/gopher-lua") && strings.Contains(line, "=>") {
			t.Errorf("go.mod replaces gopher-lua (%s): the AST was pinned at its release %s", strings.TrimSpace(line), pinnedGopherLua)
		}
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(fields) >= 2 && fields[0] == "github.com/yuin/gopher-lua" {
			required = append(required, fields[1])
		}
	}
	if len(required) != 1 || required[0] != pinnedGopherLua {
		t.Fatalf("go.mod requires gopher-lua %v, but the AST Parse builds was pinned at %s: compare gopher-lua's "+
			"ast package between the two releases and how this package builds it, then update testdata/ast "+
			"and pinnedGopherLua", required, pinnedGopherLua)
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// The AST types have the fields Parse was written against
// (testdata/ast/types.golden, in Go's syntax).
func TestASTTypesArePinned(t *testing.T) {
	var b strings.Builder
	for _, a := range astTypes {
		b.WriteString(renderType(a.typ))
		b.WriteByte('\n')
	}
	compareGolden(t, "testdata/ast/types.golden", b.String())
}

// renderType renders the fields of a struct, or the methods of an
// interface, as Go declares them.
func renderType(t reflect.Type) string {
	var members []string
	switch t.Kind() {
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if f.Anonymous {
				members = append(members, f.Type.String())
			} else {
				members = append(members, f.Name+" "+f.Type.String())
			}
		}
	case reflect.Interface:
		for i := 0; i < t.NumMethod(); i++ {
			m := t.Method(i)
			members = append(members, m.Name+strings.TrimPrefix(m.Type.String(), "func"))
		}
	default:
		return t.Name() + " " + t.Kind().String()
	}
	if len(members) == 0 {
		return fmt.Sprintf("type %s %s {}", t.Name(), t.Kind())
	}
	return fmt.Sprintf("type %s %s { %s }", t.Name(), t.Kind(), strings.Join(members, "; "))
}

// testAliases are the globals, among those the engine aliases, that the
// scripts in testdata/ast read.
var testAliases = NewAliases([]string{"ARGV", "KEYS", "_G", "pairs", "redis", "select", "string", "tostring", "unpack"}, []string{"redis.call", "redis.pcall"})

// The scripts in testdata/ast (every statement and expression Parse builds,
// and its rewrites for the budget, Lua 5.1's semantics and the aliases of
// globals) parse to the ASTs checked in beside them.
func TestParsePinnedToGopherLuaAST(t *testing.T) {
	scripts, err := filepath.Glob("testdata/ast/*.lua")
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no scripts in testdata/ast: %v", err)
	}
	seen := make(map[string]bool)
	for _, path := range scripts {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		c, err := Parse(string(src), Options{Chunk: "user_script", FirstLine: 1, Aliases: testAliases})
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "usesDots=%v work=%d pool=%v\n", c.UsesDots, c.Work, c.Pool)
		for _, s := range c.Body {
			renderNode(&b, reflect.ValueOf(s), "", seen)
		}
		compareGolden(t, strings.TrimSuffix(path, ".lua")+".ast", b.String())
	}
	var want, got []string
	for _, a := range astTypes {
		if a.produced {
			want = append(want, a.typ.Name())
		}
	}
	for name := range seen {
		got = append(got, name)
	}
	sort.Strings(want)
	sort.Strings(got)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("the scripts in testdata/ast build these node types:\n%s\nwant every node Parse builds:\n%s", got, want)
	}
}

// renderNode writes v, a node (an interface or a pointer to a struct), as a
// tree: its type, its lines (@line or @line-lastline), its scalar fields,
// then its other fields one per line, indented. It records the node types
// in seen.
func renderNode(b *strings.Builder, v reflect.Value, indent string, seen map[string]bool) {
	if v.Kind() == reflect.Interface {
		if v.IsNil() {
			b.WriteString("nil\n")
			return
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Pointer {
		panic(fmt.Sprintf("%s in the AST: a new kind of field", v.Type()))
	}
	if v.IsNil() {
		b.WriteString("nil\n")
		return
	}
	s := v.Elem()
	t := s.Type()
	b.WriteString(t.Name())
	if p, ok := v.Interface().(ast.PositionHolder); ok {
		seen[t.Name()] = true
		fmt.Fprintf(b, " @%d", p.Line())
		if p.LastLine() != 0 {
			fmt.Fprintf(b, "-%d", p.LastLine())
		}
	}
	var nested []int
	for i := 0; i < t.NumField(); i++ {
		f, fv := t.Field(i), s.Field(i)
		if f.Anonymous || !f.IsExported() {
			continue
		}
		switch {
		case fv.Kind() == reflect.String:
			fmt.Fprintf(b, " %s=%q", f.Name, fv.String())
		case fv.Kind() == reflect.Bool:
			fmt.Fprintf(b, " %s=%v", f.Name, fv.Bool())
		case fv.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.String:
			if fv.IsNil() {
				fmt.Fprintf(b, " %s=nil", f.Name)
			} else {
				fmt.Fprintf(b, " %s=%q", f.Name, fv.Interface())
			}
		case fv.Kind() == reflect.Slice || fv.Kind() == reflect.Interface || fv.Kind() == reflect.Pointer:
			nested = append(nested, i)
		default:
			panic(fmt.Sprintf("field %s.%s is a %s: a new kind of field", t.Name(), f.Name, f.Type))
		}
	}
	b.WriteByte('\n')
	for _, i := range nested {
		f, fv := t.Field(i), s.Field(i)
		fmt.Fprintf(b, "%s  %s:", indent, f.Name)
		switch {
		case fv.Kind() != reflect.Slice:
			b.WriteByte(' ')
			renderNode(b, fv, indent+"  ", seen)
		case fv.IsNil():
			b.WriteString(" nil\n")
		case fv.Len() == 0:
			b.WriteString(" []\n")
		default:
			b.WriteByte('\n')
			for j := 0; j < fv.Len(); j++ {
				fmt.Fprintf(b, "%s  - ", indent)
				renderNode(b, fv.Index(j), indent+"    ", seen)
			}
		}
	}
}

// compareGolden fails the test, naming the first line that differs, when
// got is not the content of the file at path.
func compareGolden(t *testing.T, path, got string) {
	t.Helper()
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got == string(want) {
		return
	}
	gotLines, wantLines := strings.Split(got, "\n"), strings.Split(string(want), "\n")
	for i := 0; i < max(len(gotLines), len(wantLines)); i++ {
		var g, w string
		if i < len(gotLines) {
			g = gotLines[i]
		}
		if i < len(wantLines) {
			w = wantLines[i]
		}
		if g != w {
			t.Errorf("%s differs from gopher-lua's AST as Parse builds it, from line %d:\n got: %s\nwant: %s\n"+
				"(a change of gopher-lua's ast package? see TestGopherLuaIsThePinnedVersion)\nthe whole of it:\n%s",
				path, i+1, g, w, got)
			return
		}
	}
}
