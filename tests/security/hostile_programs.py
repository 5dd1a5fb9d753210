"""One hostile program per language for ``test_language_hazards.py``. Each reads a mode from stdin:

* ``escape SECRET PORT TARGET``: create ``TARGET`` (a host path outside the work directory), read
  ``/etc/shadow`` and ``SECRET`` (a file the test made on the host), connect to ``127.0.0.1:PORT`` (a
  host listener); one line per attempt, ``<what> denied`` when it failed;
* ``memory``: allocate and touch 16 MiB blocks forever;
* ``fork``: start processes until one is refused, then print ``refused`` (bash: the classic bomb).
"""

from __future__ import annotations

C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <netinet/in.h>
static void probe_read(const char *label, const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) { printf("%s denied\n", label); return; }
  char buf[64] = {0}; size_t n = fread(buf, 1, 63, f); printf("%s READ %zu %s\n", label, n, buf); fclose(f);
}
int main(void) {
  static char mode[16], secret[4096], target[4096]; int port = 0;
  setvbuf(stdout, NULL, _IONBF, 0);
  if (scanf("%15s", mode) != 1) return 2;
  if (!strcmp(mode, "fork")) {
    for (int i = 0; i < 100000; i++) { pid_t p = fork(); if (p == 0) { pause(); _exit(0); } if (p < 0) { puts("refused"); return 0; } }
    puts("unbounded"); return 0;
  }
  if (!strcmp(mode, "memory")) {
    for (;;) { char *p = (char *)malloc(16 << 20); if (!p) { puts("malloc failed"); return 1; } memset(p, 1, 16 << 20); }
  }
  if (scanf("%4095s %d %4095s", secret, &port, target) != 3) return 2;
  FILE *w = fopen(target, "w");
  puts(w ? "write DONE" : "write denied");
  probe_read("shadow", "/etc/shadow");
  probe_read("secret", secret);
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a; memset(&a, 0, sizeof a);
  a.sin_family = AF_INET; a.sin_port = htons((unsigned short)port); a.sin_addr.s_addr = htonl(0x7f000001);
  puts(s >= 0 && connect(s, (struct sockaddr *)&a, sizeof a) == 0 ? "net CONNECTED" : "net denied");
  return 0;
}
"""

RUST = r"""
use std::io::Read;
fn main() {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    let a: Vec<&str> = s.split_whitespace().collect();
    match a[0] {
        "fork" => {
            let mut kids = Vec::new();
            for _ in 0..100000 {
                match std::process::Command::new("/bin/sleep").arg("60").spawn() {
                    Ok(c) => kids.push(c),
                    Err(_) => { println!("refused"); return; }
                }
            }
            println!("unbounded");
        }
        "memory" => { let mut v: Vec<Vec<u8>> = Vec::new(); loop { v.push(vec![1u8; 16 << 20]); } }
        _ => {
            println!("write {}", if std::fs::File::create(a[3]).is_ok() { "DONE" } else { "denied" });
            for (label, path) in [("shadow", "/etc/shadow"), ("secret", a[1])] {
                match std::fs::read_to_string(path) {
                    Ok(t) => println!("{} READ {}", label, t),
                    Err(_) => println!("{} denied", label),
                }
            }
            let port: u16 = a[2].parse().unwrap();
            let ok = std::net::TcpStream::connect(("127.0.0.1", port)).is_ok();
            println!("net {}", if ok { "CONNECTED" } else { "denied" });
        }
    }
}
"""

GO = r"""
package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
)

func main() {
	var mode, secret, port, target string
	fmt.Scan(&mode)
	switch mode {
	case "fork":
		for i := 0; i < 100000; i++ {
			if err := exec.Command("/bin/sleep", "60").Start(); err != nil {
				fmt.Println("refused")
				return
			}
		}
		fmt.Println("unbounded")
	case "memory":
		var keep [][]byte
		for {
			b := make([]byte, 16<<20)
			for i := range b {
				b[i] = 1
			}
			keep = append(keep, b)
		}
	default:
		fmt.Scan(&secret, &port, &target)
		if f, err := os.Create(target); err == nil {
			f.Close()
			fmt.Println("write DONE")
		} else {
			fmt.Println("write denied")
		}
		for _, p := range [][2]string{{"shadow", "/etc/shadow"}, {"secret", secret}} {
			if t, err := os.ReadFile(p[1]); err == nil {
				fmt.Println(p[0], "READ", string(t))
			} else {
				fmt.Println(p[0], "denied")
			}
		}
		if c, err := net.Dial("tcp", "127.0.0.1:"+port); err == nil {
			c.Close()
			fmt.Println("net CONNECTED")
		} else {
			fmt.Println("net denied")
		}
	}
}
"""

JAVA = r"""
import java.io.*;
import java.net.*;
import java.nio.file.*;
import java.util.*;

public class Main {
    public static void main(String[] x) throws Exception {
        Scanner in = new Scanner(System.in);
        String mode = in.next();
        if (mode.equals("fork")) {
            List<Process> kids = new ArrayList<>();
            try {
                for (int i = 0; i < 100000; i++) kids.add(new ProcessBuilder("/bin/sleep", "60").start());
                System.out.println("unbounded");
            } catch (Throwable e) {
                System.out.println("refused");
            }
            System.exit(0);
        }
        if (mode.equals("memory")) {
            List<byte[]> keep = new ArrayList<>();
            while (true) { byte[] b = new byte[16 << 20]; Arrays.fill(b, (byte) 1); keep.add(b); }
        }
        String secret = in.next();
        int port = in.nextInt();
        String target = in.next();
        try { new FileOutputStream(target).close(); System.out.println("write DONE"); }
        catch (IOException e) { System.out.println("write denied"); }
        for (String[] p : new String[][] {{"shadow", "/etc/shadow"}, {"secret", secret}}) {
            try { System.out.println(p[0] + " READ " + Files.readString(Path.of(p[1]))); }
            catch (IOException e) { System.out.println(p[0] + " denied"); }
        }
        try { new Socket("127.0.0.1", port).close(); System.out.println("net CONNECTED"); }
        catch (IOException e) { System.out.println("net denied"); }
    }
}
"""

JAVASCRIPT = r"""
const fs = require('fs');
const a: any[] = fs.readFileSync(0, 'utf8').trim().split(/\s+/);
if (a[0] === 'fork') {
  const kids: any[] = [];
  for (let i = 0; i < 100000; i++) {
    let child: any;
    try { child = require('child_process').spawn('/bin/sleep', ['60']); } catch (e) { console.log('refused'); process.exit(0); }
    if (child.pid === undefined) { console.log('refused'); process.exit(0); }
    kids.push(child);
  }
  console.log('unbounded');
} else if (a[0] === 'memory') {
  const keep: any[] = [];
  for (;;) keep.push(Buffer.alloc(16 << 20, 1));
} else {
  try { fs.writeFileSync(a[3], 'x'); console.log('write DONE'); } catch (e) { console.log('write denied'); }
  for (const [label, path] of [['shadow', '/etc/shadow'], ['secret', a[1]]]) {
    try { console.log(label + ' READ ' + fs.readFileSync(path, 'utf8')); } catch (e) { console.log(label + ' denied'); }
  }
  const socket = require('net').connect(Number(a[2]), '127.0.0.1');
  socket.on('connect', () => { console.log('net CONNECTED'); socket.destroy(); });
  socket.on('error', () => console.log('net denied'));
}
"""

BASH = r"""
read -r mode secret port target
case $mode in
fork) bomb() { bomb | bomb & }; bomb; wait ;;
memory) x=aaaaaaaaaaaaaaaa; while :; do x=$x$x; done ;;
*)
  if (echo x > "$target") 2>/dev/null; then echo write DONE; else echo write denied; fi
  for p in "shadow:/etc/shadow" "secret:$secret"; do
    if c=$(cat "${p#*:}" 2>/dev/null); then echo "${p%%:*} READ $c"; else echo "${p%%:*} denied"; fi
  done
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo net CONNECTED; else echo net denied; fi ;;
esac
"""

# Python's own hazards are in the other security modules; this one runs in the ``python-data`` runtime
# (numpy preloaded in a zygote of its own), with numpy as the memory bomb's allocator.
PYTHON_DATA = r"""
import os, socket, sys
import numpy as np

def attempt(label, fn):
    try:
        fn()
        print(label, "DONE", flush=True)
    except OSError:
        print(label, "denied", flush=True)

words = sys.stdin.readline().split()
if words[0] == "escape":
    secret, port, target = words[1], int(words[2]), words[3]
    attempt("write", lambda: open(target, "w").write("x"))
    attempt("shadow", lambda: open("/etc/shadow").read())
    attempt("secret", lambda: print(open(secret).read()))
    attempt("net", lambda: socket.create_connection(("127.0.0.1", port), timeout=2))
elif words[0] == "memory":
    blocks = []
    while True:
        blocks.append(np.ones(1 << 21))  # 16 MiB, touched
elif words[0] == "fork":
    while True:
        try:
            if os.fork() == 0:
                os.pause()
        except OSError:
            print("refused")
            break
"""

PROGRAMS = {
    "c": C,
    "cpp": C,
    "rust": RUST,
    "go": GO,
    "java": JAVA,
    "javascript": JAVASCRIPT.replace(": any[]", "").replace(": any;", ";"),
    "typescript": JAVASCRIPT,
    "bash": BASH,
}
