#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
#   tools/man-names.sh [PAGE...]     (default: man/*.3)
#
# Prints "PAGE NAME" for every name in the NAME section of each page: a
# grouped page such as man/knitk_producer.3 documents several functions.
# make install puts a ".so" link man3/NAME.3 to each page it names
# (tools/install.sh); tools/pkg-check.sh requires a name for every public
# function.
[ "$#" -gt 0 ] || set -- man/*.3
for page in "$@"; do
	sed -n '/^\.SH NAME/,/^\.SH/{/^\.SH/d;p}' "$page" |
		tr '\n' ' ' | sed 's/\\-.*//; s/,/ /g' | tr -s ' ' '\n' | sed '/^$/d' |
		while read -r name; do
			echo "${page##*/} $name"
		done
done
