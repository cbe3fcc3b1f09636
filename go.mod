module github.com/skynetml/skynet

go 1.26.8

require (
	github.com/stretchr/testify v1.11.1
	go.etcd.io/bbolt v1.5.0
	golang.org/x/time v0.16.0
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	golang.org/x/sys v0.45.0 // indirect
)
