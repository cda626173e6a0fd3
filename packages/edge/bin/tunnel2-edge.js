#!/usr/bin/env node
// The edge server's executable, what the container image runs: `tunnel2-edge --help` lists every setting.
import '../dist/main.js';
