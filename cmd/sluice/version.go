package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// module is the Sluice module's path.
const module = "github.com/sluicehq/sluice"

// versionInfo is what sluice version prints.
type versionInfo struct {
	// Version is the Sluice module's version: the main module's when the
	// binary is built from Sluice itself, else the required one.
	Version   string `json:"version"`
	Module    string `json:"module"`
	Main      string `json:"main,omitempty"` // the main module, when it is not Sluice
	GoVersion string `json:"go"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	Revision  string `json:"revision,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
}

// buildInfo reads the binary's build information.
func buildInfo(read func() (*debug.BuildInfo, bool)) versionInfo {
	v := versionInfo{Version: "unknown", Module: module, GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	bi, ok := read()
	if !ok {
		return v
	}
	v.GoVersion = bi.GoVersion
	if bi.Main.Path == module {
		v.Version = bi.Main.Version
	} else {
		v.Main = bi.Main.Path
		for _, d := range bi.Deps {
			if d.Path == module {
				v.Version = d.Version
				if d.Replace != nil {
					v.Version += " => " + d.Replace.Path + " " + d.Replace.Version
				}
			}
		}
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

func printVersion(v versionInfo, format string, out io.Writer) error {
	if format == outputJSON {
		return printJSON(out, v)
	}
	fmt.Fprintf(out, "sluice %s (%s) %s %s/%s", v.Version, v.Module, v.GoVersion, v.OS, v.Arch)
	if v.Revision != "" {
		fmt.Fprintf(out, " revision %s", v.Revision)
		if v.Modified {
			fmt.Fprint(out, " (modified)")
		}
	}
	fmt.Fprintln(out)
	return nil
}
