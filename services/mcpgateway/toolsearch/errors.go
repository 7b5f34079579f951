package toolsearch

import "errors"

var (
	// ErrBadArguments means a meta-tool's arguments are not what its input schema asks.
	ErrBadArguments = errors.New("invalid arguments")
	// ErrUnknownServer means search_tools' server filter names no server the caller may use
	// through the preset (a hidden server is worded the same).
	ErrUnknownServer = errors.New("server is not one of this preset's")
)
