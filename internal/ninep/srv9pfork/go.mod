module 9fans.net/go

go 1.23.0
