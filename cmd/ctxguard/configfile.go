package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/ctxguard/ctxguard/config"
)

// configFile returns the configuration file to read: the --config flag's
// value when given (empty: none), else the default file
// (config.DefaultFile) when it exists, else none (""). A default file
// that exists but cannot be read is returned all the same, so that
// loading it reports why.
func configFile(flagValue string, given bool) string {
	if given {
		return flagValue
	}
	path, err := config.DefaultFile()
	if err != nil {
		return "" // no home: no default file
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return ""
	}
	return path
}

// initConfig writes the starter configuration file (config --init) to
// the one argument of fs, else to flagFile (--config), else to the
// default file, and says where and how serve finds it.
func initConfig(fs *flag.FlagSet, flagFile string, w io.Writer) error {
	path := flagFile
	switch {
	case fs.NArg() > 1:
		return usageError{cmd: fs.Name(), err: fmt.Errorf("--init takes one file, not %d", fs.NArg())}
	case fs.NArg() == 1 && flagFile != "" && fs.Arg(0) != flagFile:
		return usageError{cmd: fs.Name(), err: fmt.Errorf("--init: two files named, %s and --config %s", fs.Arg(0), flagFile)}
	case fs.NArg() == 1:
		path = fs.Arg(0)
	}
	def, err := config.DefaultFile()
	if path == "" {
		if err != nil {
			return fmt.Errorf("config --init: %w; name the file: ctxguard config --init FILE", err)
		}
		path = def
	}
	if err := config.WriteStarter(path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("config --init: %s exists; it is left as it is (remove it first to start afresh, or edit it; ctxguard config --config %s prints what it sets)", path, path)
		}
		return err
	}
	how := "ctxguard serve reads it when started without --config"
	if path != def {
		how = "start ctxguard serve --config " + path + " to use it"
	}
	_, err = fmt.Fprintf(w, "wrote %s: every setting at its default, commented out; %s\n", path, how)
	return err
}
