module github.com/ctxguard/ctxguard

go 1.26.8

require (
	github.com/JohannesKaufmann/html-to-markdown/v2 v2.5.2
	github.com/andybalholm/brotli v1.2.8
	github.com/google/go-cmp v0.7.0
	github.com/klauspost/compress v1.20.3
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/JohannesKaufmann/dom v0.3.1 // indirect
	golang.org/x/net v0.55.0 // indirect
)
