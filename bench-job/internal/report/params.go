package report

import (
	"fmt"
	"reflect"
	"strings"

	"sluice.dev/bench/internal/result"
)

// paramRow is one line of the report's Parameters table.
type paramRow struct{ Name, Value string }

// paramRows lists a run's parameters under their JSON names (the names
// summary.json and the Benchmark spec use), in declaration order, leaving
// out the optional ones a run did not set.
func paramRows(p result.Params) []paramRow {
	var rows []paramRow
	v, t := reflect.ValueOf(p), reflect.TypeOf(p)
	for i := range t.NumField() {
		name, opts, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		f := v.Field(i)
		if name == "" || name == "-" || opts == "omitempty" && f.IsZero() {
			continue
		}
		var val string
		switch x := f.Interface().(type) {
		case result.Role:
			val = fmt.Sprintf("%d process(es) x %d worker(s)", x.Processes, x.Workers)
		case []int64:
			parts := make([]string, len(x))
			for j, n := range x {
				parts[j] = fmt.Sprint(n)
			}
			val = strings.Join(parts, ", ")
		default:
			val = fmt.Sprint(x)
		}
		rows = append(rows, paramRow{name, val})
	}
	return rows
}
