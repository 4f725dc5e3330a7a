module github.com/ctxguard/ctxguard

go 1.26.8

require (
	github.com/JohannesKaufmann/dom v0.3.1 // indirect
	github.com/JohannesKaufmann/html-to-markdown/v2 v2.5.2 // indirect
	github.com/andybalholm/brotli v1.2.8 // indirect
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	golang.org/x/net v0.55.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
