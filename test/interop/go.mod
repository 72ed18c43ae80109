module stele.test/interop

go 1.19

require golang.org/x/mod v0.7.0

// No module proxy: Debian's and Ubuntu's golang-golang-x-mod-dev install the source here.
replace golang.org/x/mod => /usr/share/gocode/src/golang.org/x/mod
