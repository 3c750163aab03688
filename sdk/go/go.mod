module github.com/weftrpc/weft/sdk/go

go 1.24
