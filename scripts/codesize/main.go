// Command codesize measures what a maintainer of the module carries: the
// exported names of its public packages (those a user can import: not
// internal, not a command), and its functions longer than a bound. It
// prints both, and exits 1 when either is over its limit.
//
//	go run ./scripts/codesize [-exported 661] [-lines 80] [-names-reported] [-v] [root]
//
// Exported names are counted as go doc shows them to a user: types,
// functions, variables and constants; methods of exported types; fields of
// exported struct types; methods of exported interfaces. Tests and examples
// (their own module) are left out.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

func main() {
	maxExported := flag.Int("exported", 661, "most exported names allowed across the public packages")
	maxLines := flag.Int("lines", 80, "most lines allowed in a function")
	verbose := flag.Bool("v", false, "list the names of each package")
	namesReported := flag.Bool("names-reported", false, "report the exported names without failing over their limit")
	flag.Parse()
	root := "."
	if flag.NArg() > 0 {
		root = flag.Arg(0)
	}
	pkgs, err := parse(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "codesize:", err)
		os.Exit(2)
	}
	over := false
	total := 0
	var lines []string
	for _, p := range pkgs {
		if !p.public() {
			continue
		}
		names := p.exported()
		total += len(names)
		lines = append(lines, fmt.Sprintf("  %4d %s", len(names), p.dir))
		if *verbose {
			for _, n := range names {
				lines = append(lines, "         "+n)
			}
		}
	}
	fmt.Printf("exported names: %d across the public packages (limit %d)\n", total, *maxExported)
	for _, l := range lines {
		fmt.Println(l)
	}
	if total > *maxExported && !*namesReported {
		over = true
	}
	var long []string
	for _, p := range pkgs {
		for _, f := range p.funcs() {
			if f.lines > *maxLines {
				long = append(long, fmt.Sprintf("  %4d %s:%d %s", f.lines, f.file, f.line, f.name))
			}
		}
	}
	fmt.Printf("functions over %d lines: %d\n", *maxLines, len(long))
	for _, l := range long {
		fmt.Println(l)
	}
	if len(long) > 0 {
		over = true
	}
	if over {
		os.Exit(1)
	}
}

// pkg is the non-test files of one directory.
type pkg struct {
	dir   string // relative to the root, slash-separated
	name  string
	fset  *token.FileSet
	files map[string]*ast.File // by path
}

// public reports whether a user can import the package.
func (p *pkg) public() bool {
	return p.name != "main" && !slices.Contains(strings.Split(p.dir, "/"), "internal")
}

// parse reads the non-test Go files under root, by directory; it skips
// hidden directories, testdata, and nested modules.
func parse(root string) ([]*pkg, error) {
	byDir := map[string]*pkg{}
	var dirs []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || fileExists(filepath.Join(path, "go.mod"))) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		p := byDir[rel]
		if p == nil {
			p = &pkg{dir: rel, name: f.Name.Name, fset: fset, files: map[string]*ast.File{}}
			byDir[rel] = p
			dirs = append(dirs, rel)
		}
		p.files[path] = f
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(dirs)
	out := make([]*pkg, len(dirs))
	for i, d := range dirs {
		out[i] = byDir[d]
	}
	return out, nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// exported returns the exported names of the package, sorted.
func (p *pkg) exported() []string {
	var names []string
	add := func(n string) { names = append(names, n) }
	for _, f := range p.files {
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					add(d.Name.Name)
				} else if recv := receiver(d.Recv.List[0].Type); ast.IsExported(recv) {
					add(recv + "." + d.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								add(n.Name)
							}
						}
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						add(s.Name.Name)
						for _, m := range members(s.Type) {
							add(s.Name.Name + "." + m)
						}
					}
				}
			}
		}
	}
	slices.Sort(names)
	return names
}

// members returns the exported fields of a struct type, or the exported
// methods of an interface type.
func members(t ast.Expr) []string {
	var list *ast.FieldList
	switch t := t.(type) {
	case *ast.StructType:
		list = t.Fields
	case *ast.InterfaceType:
		list = t.Methods
	default:
		return nil
	}
	var out []string
	for _, f := range list.List {
		for _, n := range f.Names {
			if n.IsExported() {
				out = append(out, n.Name)
			}
		}
	}
	return out
}

// receiver returns the name of a method's receiver type.
func receiver(t ast.Expr) string {
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// function is a function or method and its length in lines.
type function struct {
	file  string
	line  int
	name  string
	lines int
}

// funcs returns the package's functions and methods with their lengths,
// longest first.
func (p *pkg) funcs() []function {
	var out []function
	for path, f := range p.files {
		for _, decl := range f.Decls {
			d, ok := decl.(*ast.FuncDecl)
			if !ok || d.Body == nil {
				continue
			}
			name := d.Name.Name
			if d.Recv != nil {
				name = receiver(d.Recv.List[0].Type) + "." + name
			}
			start, end := p.fset.Position(d.Pos()), p.fset.Position(d.End())
			out = append(out, function{file: path, line: start.Line, name: name, lines: end.Line - start.Line + 1})
		}
	}
	slices.SortFunc(out, func(a, b function) int { return b.lines - a.lines })
	return out
}
