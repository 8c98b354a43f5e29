package main

import (
	"context"
	"flag"
)

func doctorCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("doctor", flag.ExitOnError)
	var c common
	c.register(fs)
	fs.Parse(args)
	return nil
}
