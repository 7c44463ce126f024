package app_test

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Every Go snippet of the README and of the pages in docs/ is code that
// compiles: its lines appear, in order and together, in a Go file of the
// repository (the example module's included), which the tests build. And
// the line counts the README gives of the example's files are the files'
// own.
func TestREADME_every_go_snippet_is_compiled_code_and_the_line_counts_are_true(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no pages in docs/: %v", err)
	}
	docs := string(readme)
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		docs += "\n" + string(b)
	}
	var sources []string
	err = filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "projector-data") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(path, ".go") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sources = append(sources, "\n"+strings.Join(codeLines(string(b)), "\n")+"\n")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(regexp.MustCompile("(?s)```go\n(.*?)```").FindAllString(string(readme), -1)); n < 5 {
		t.Fatalf("%d Go snippets in the README; the zero-to-running section has at least 5", n)
	}
	snippets := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(docs, -1)
	for _, m := range snippets {
		want := "\n" + strings.Join(codeLines(m[1]), "\n") + "\n"
		found := false
		for _, src := range sources {
			if strings.Contains(src, want) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("this snippet of the README or docs/ is in no Go file of the repository, so nothing compiles it:\n%s", m[1])
		}
	}

	counts := regexp.MustCompile("(?m)^\\| `(examples/[^`]+\\.go)`[^|]* \\| (\\d+) \\|$").FindAllStringSubmatch(string(readme), -1)
	if len(counts) == 0 {
		t.Fatal("no line counts of the example in the README")
	}
	for _, m := range counts {
		f, err := os.Open(filepath.Join("..", m[1]))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for sc := bufio.NewScanner(f); sc.Scan(); {
			n++
		}
		f.Close()
		if want, _ := strconv.Atoi(m[2]); n != want {
			t.Errorf("README says %s has %d lines; it has %d", m[1], want, n)
		}
	}
}

// codeLines returns the lines of src, each trimmed, without blank ones.
func codeLines(src string) []string {
	var out []string
	for _, l := range strings.Split(src, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}
