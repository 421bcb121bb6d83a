#!/bin/sh
# Prints the Markdown table of bench/sim/README.md from a results.csv
# written by cellsim: average and p99 FCT slowdown per workload, load
# and scheme, and each scheme's p99 relative to ECMP's in the same run.
#   sh bench/sim/table.sh bench/sim/fig5/results.csv
awk -F, 'NR == 1 { next }
{
	k = $2 "|" $3; s[k "|" $1] = $7; p[k "|" $1] = $10
	if ($1 == "ecmp") e[k] = $10
	if (!(k in seen)) { seen[k] = 1; order[n++] = k }
	if (!($1 in sc)) { sc[$1] = 1; scheme[m++] = $1 }
}
END {
	printf "| workload | load | scheme | avg | p99 | p99 / ECMP p99 |\n|---|---|---|---|---|---|\n"
	for (i = 0; i < n; i++) for (j = 0; j < m; j++) {
		k = order[i]; x = k "|" scheme[j]
		if (!(x in s)) continue
		split(k, a, "|")
		printf "| %s | %d%% | %s | %.2f | %.2f | %.2f |\n", a[1], a[2] * 100, scheme[j], s[x], p[x], (e[k] > 0 ? p[x] / e[k] : 0)
	}
}' "$1"
