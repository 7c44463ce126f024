package app

import (
	"flag"
	"io"
	"slices"
	"testing"
)

// A variable of the prefix that no flag reads, named like a flag whose own
// variable is not set and which was not given, is pointed out with the one
// meant; one like no flag, or like a flag set otherwise, is left alone.
func TestMisspelledEnv_names_the_variable_meant(t *testing.T) {
	newFS := func() *flag.FlagSet {
		fs := flag.NewFlagSet("x run", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.String("mongo", "", "")
		fs.Int("workers", 4, "")
		fs.Duration("lease", 0, "")
		fs.Int("batch", 0, "")
		fs.Int("batch-mib", 0, "")
		return fs
	}
	cases := []struct {
		name    string
		args    []string
		environ []string
		want    []string
	}{
		{"a longer name", nil, []string{"PROJECTOR_MONGO_URI=m"}, []string{"PROJECTOR_MONGO_URI is set, but no flag reads it: ignored (did you mean PROJECTOR_MONGO, for --mongo?)"}},
		{"a letter missing", nil, []string{"HOME=/", "PROJECTOR_WORKER=2"}, []string{"PROJECTOR_WORKER is set, but no flag reads it: ignored (did you mean PROJECTOR_WORKERS, for --workers?)"}},
		{"a dash for an underscore", nil, []string{"PROJECTOR_BATCH-MIB=9"}, []string{"PROJECTOR_BATCH-MIB is set, but no flag reads it: ignored (did you mean PROJECTOR_BATCH_MIB, for --batch-mib?)"}},
		{"the flag's own is set too", nil, []string{"PROJECTOR_MONGO_URI=m", "PROJECTOR_MONGO=n"}, nil},
		{"the flag given", []string{"--mongo", "n"}, []string{"PROJECTOR_MONGO_URI=m"}, nil},
		{"like no flag", nil, []string{"PROJECTOR_TEST_POSTGRES=p", "PROJECTOR_GROUP=g", "PROJECTOR_=x"}, nil},
		{"short names need to be close", nil, []string{"PROJECTOR_LEAF=1s", "PROJECTOR_LEAS=1s"}, []string{"PROJECTOR_LEAS is set, but no flag reads it: ignored (did you mean PROJECTOR_LEASE, for --lease?)"}},
		{"another prefix", nil, []string{"OTHER_MONGO_URI=m"}, nil},
		{"lower case", nil, []string{"PROJECTOR_workers=2"}, []string{"PROJECTOR_workers is set, but no flag reads it: ignored (did you mean PROJECTOR_WORKERS, for --workers?)"}},
		{"read", nil, []string{"PROJECTOR_MONGO=m", "PROJECTOR_BATCH=3"}, nil},
	}
	for _, c := range cases {
		fs := newFS()
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if got := misspelledEnv(fs, "PROJECTOR_", c.environ); !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
