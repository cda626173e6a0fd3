"""Runs a command under a real pseudo-terminal for the terminal-view tests.

usage: pty-run.py <columns> <rows> <command> [args...]
The pty's output is copied to stdout as it comes. Lines on stdin steer it:
  resize <columns> <rows>   sets the window size (the kernel sends SIGWINCH to the command)
  signal <NAME>             sends the signal (INT, TERM) to the command
  ctrl-c                    types Ctrl-C: the terminal echoes ^C and sends SIGINT to the command
  pause / resume            stops / starts reading the pty (a terminal that does not read: its output stalls);
                            a signal or the end of stdin resumes it, so that the helper sees the command end
Exits with the command's exit status once it ended and its output was read.
"""
import fcntl, os, select, signal, struct, subprocess, sys, termios


def set_size(fd, columns, rows):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack('HHHH', rows, columns, 0, 0))


def main():
    columns, rows, command = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    master, slave = os.openpty()
    set_size(master, columns, rows)

    def controlling_terminal():
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    child = subprocess.Popen(command, stdin=slave, stdout=slave, stderr=slave, preexec_fn=controlling_terminal)
    os.close(slave)
    out = sys.stdout.buffer
    stdin = sys.stdin.fileno()
    watching = [master, stdin]
    while True:
        ready, _, _ = select.select(watching, [], [], 0.05)
        if master in ready:
            try:
                data = os.read(master, 65536)
            except OSError:
                data = b''
            if not data:
                break
            out.write(data)
            out.flush()
        if stdin in ready:
            line = sys.stdin.readline()
            if not line:
                watching.remove(stdin)
                # Read to the end: a paused helper would never see the command exit.
                if master not in watching:
                    watching.append(master)
                continue
            words = line.split()
            if words[:1] == ['resize']:
                set_size(master, int(words[1]), int(words[2]))
            elif words[:1] == ['signal']:
                child.send_signal(getattr(signal, 'SIG' + words[1]))
                if master not in watching:
                    watching.append(master)
            elif words[:1] == ['ctrl-c']:
                os.write(master, b'\x03')
            elif words[:1] == ['pause'] and master in watching:
                watching.remove(master)
            elif words[:1] == ['resume'] and master not in watching:
                watching.append(master)
    sys.exit(child.wait())


main()
