// Command valuesdoc rewrites the values table of a chart's README.md from
// the `# --` comments of its values.yaml: valuesdoc charts/sluice.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"sluice.dev/e2e/chart/internal/valuesdoc"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: valuesdoc CHART_DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "valuesdoc:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	values, err := os.ReadFile(filepath.Join(dir, "values.yaml"))
	if err != nil {
		return err
	}
	rows, err := valuesdoc.Rows(values)
	if err != nil {
		return err
	}
	readmePath := filepath.Join(dir, "README.md")
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		return err
	}
	out, err := valuesdoc.Splice(string(readme), valuesdoc.Table(rows))
	if err != nil {
		return err
	}
	return os.WriteFile(readmePath, []byte(out), 0o644)
}
