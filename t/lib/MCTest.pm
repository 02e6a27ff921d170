# MCTest.pm: helpers for the TAP suites that drive a real memcached-compatible
# server over loopback TCP. Owns server start/stop and raw-socket I/O with
# timeouts; it knows nothing about what a particular test expects.
#
# Environment: MC_SERVER (server binary, default /usr/bin/memcached) and
# MC_TARGET ("ours" or "memcached").
#
# API (all exported):
#   my $srv = start_server(@args);   start MC_SERVER on 127.0.0.1, a free port,
#                                    -U 0, plus @args (e.g. -m 2 -M -c 32 -A);
#                                    dies if it does not accept within 10 s.
#                                    A leading hashref of options:
#                                    { listen => 0 } leaves out "-l 127.0.0.1"
#                                    (default address); { port_file => 1 }
#                                    passes "-p -1" and learns the port the
#                                    server chose from MEMCACHED_PORT_FILENAME.
#   my ($exited, $status, $log) = run_briefly($secs, @args)
#                                    start like start_server, wait up to $secs
#                                    for the process to exit by itself; kills
#                                    it if not ($exited false then).
#   $srv->port, $srv->pid, $srv->log (path of the captured stderr),
#   $srv->log_text                   what the server wrote to stderr so far
#   $srv->alive                      true while the process runs
#   $srv->wait_exit($secs)           true once the process has exited
#   $srv->exit_status                its wait status ($?) once it has exited
#   $srv->check_log($what)           TAP assertion: no sanitizer report
#   my $s = $srv->connect;           new blocking socket (dies on failure)
#   $srv->stop;                      SIGTERM, wait; adds TAP assertions: exited,
#                                    status 0, no sanitizer report in its log.
#                                    Servers still running at exit (also on
#                                    die, SIGINT, SIGTERM, SIGHUP) are killed.
#   (the mc_* helpers also take IO::Socket::SSL sockets: see MCTLS.pm)
#   mc_send($s, $bytes)              write all bytes; false if the peer has
#                                    closed, dies on other errors (SIGPIPE
#                                    is ignored so a closing server cannot
#                                    kill the test)
#   mc_line($s [, $timeout])         one reply line incl. "\r\n"; on timeout
#                                    or EOF returns what arrived (maybe "")
#   mc_bytes($s, $n [, $timeout])    exactly $n bytes, or fewer on timeout/EOF
#   mc_until($s, $end [, $timeout])  bytes up to and including $end
#   mc_is($s, $request, $expected, $name)  send, read length($expected)
#                                    bytes, compare (one TAP assertion); on a
#                                    mismatch, drains what else arrives
#                                    within 0.3 s so later checks stay in step
#   mc_silent($s [, $wait])          true if nothing arrives within $wait s
#   mc_eof($s [, $timeout])          true if the peer closes (reads drain)
#   mc_stats($s [, $group])          hashref of "STAT name value" lines
#   mc_resync($s [, $timeout])       sends "version", skips ERROR/CLIENT_ERROR
#                                    lines, true when the VERSION line arrives
#   target()                         "ours" or "memcached"
#   free_port()                      a port that was free on 127.0.0.1
# Default timeout for reads: 5 s. Every read loop is bounded by its deadline.
package MCTest;
use strict;
use warnings;
use Exporter 'import';
use IO::Socket::INET;
use IO::Select;
use POSIX qw(WNOHANG);
use Time::HiRes qw(time sleep);
use File::Temp qw(tempfile);
use Test::More ();

our @EXPORT = qw(start_server run_briefly mc_send mc_line mc_bytes mc_until mc_is
  mc_silent mc_eof mc_stats mc_resync mc_count_values mc_read_back target free_port slurp);

my $DEFAULT_TIMEOUT = 5;
my %running;    # pid => server object, killed at exit if still alive

sub target { $ENV{MC_TARGET} || 'memcached' }

sub free_port {
    my $l = IO::Socket::INET->new(
        LocalAddr => '127.0.0.1', LocalPort => 0, Proto => 'tcp', Listen => 1,
        ReuseAddr => 1) or die "cannot bind a probe socket: $!";
    my $port = $l->sockport;
    close $l;
    return $port;
}

sub _spawn {
    my ($opt, @args) = @_;
    my $bin = $ENV{MC_SERVER} || '/usr/bin/memcached';
    die "MC_SERVER $bin is not executable\n" unless -x $bin;
    my $port = free_port();
    my ($fh, $log) = tempfile('mctest-XXXXXX', TMPDIR => 1, UNLINK => 1);
    close $fh;
    my @cmd = ($bin);
    push @cmd, '-l', '127.0.0.1' if $opt->{listen} // 1;
    my $port_file;
    if ($opt->{port_file}) {    # the server picks its port and writes it down
        (my $pfh, $port_file) = tempfile('mcport-XXXXXX', TMPDIR => 1, UNLINK => 1);
        close $pfh;
        unlink $port_file;
        $port = undef;
    }
    push @cmd, '-p', $port // '-1', '-U', '0';
    push @cmd, '-u', 'root' if $> == 0;    # memcached refuses root without -u
    push @cmd, @args;
    my $pid = fork();
    die "fork: $!" unless defined $pid;
    if ($pid == 0) {
        $ENV{MEMCACHED_PORT_FILENAME} = $port_file if $port_file;
        open STDIN, '<', '/dev/null';
        open STDOUT, '>>', $log;
        open STDERR, '>>', $log;
        exec @cmd or POSIX::_exit(127);
    }
    my $srv = bless { pid => $pid, port => $port, log => $log, cmd => \@cmd,
        port_file => $port_file }, __PACKAGE__;
    $running{$pid} = $srv;
    return $srv;
}

sub run_briefly {
    my ($secs, @args) = @_;
    my $srv = _spawn({}, @args);
    my $exited = $srv->wait_exit($secs);
    $srv->_kill unless $exited;
    return ($exited, $srv->{status}, $srv->log_text);
}

sub start_server {
    my $opt = ref $_[0] eq 'HASH' ? shift : {};
    my @args = @_;
    for my $attempt (1 .. 3) {
        my $srv = _spawn($opt, @args);
        my ($port, @cmd) = ($srv->{port}, @{ $srv->{cmd} });
        my $deadline = time + 10;
        while (time < $deadline) {
            if (!$srv->alive) {
                last;
            }
            if (!defined $srv->{port}) {    # port_file: wait for "TCP INET: <port>"
                ($srv->{port}) = slurp($srv->{port_file}) =~ /^TCP INET: (\d+)$/m;
                $port = $srv->{port};
                if (!defined $port) { sleep 0.02; next }
            }
            my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port,
                Proto => 'tcp', Timeout => 1);
            if ($s) { close $s; return $srv; }
            sleep 0.02;
        }
        my $text = $srv->log_text;
        my $state = $srv->alive ? 'still running but not accepting after 10 s'
          : 'exited with wait status ' . $srv->exit_status;
        $srv->_kill;
        next if $text =~ /Address already in use/ && $attempt < 3;
        die "server did not start ($state): @cmd\n$text\n";
    }
    die "server did not start after 3 attempts\n";
}

sub port { $_[0]{port} }
sub pid  { $_[0]{pid} }
sub log  { $_[0]{log} }

sub log_text {
    my $self = shift;
    open my $fh, '<', $self->{log} or return '';
    local $/;
    my $t = <$fh>;
    return defined $t ? $t : '';
}

sub exit_status { $_[0]{status} }

sub alive {
    my $self = shift;
    return 0 if defined $self->{status};
    my $r = waitpid($self->{pid}, WNOHANG);
    if ($r == $self->{pid}) {
        $self->{status} = $?;
        delete $running{$self->{pid}};
        return 0;
    }
    return 1;
}

sub connect {
    my $self = shift;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $self->{port},
        Proto => 'tcp', Timeout => $DEFAULT_TIMEOUT)
      or die "connect to 127.0.0.1:$self->{port}: $!\n";
    binmode $s;
    $s->autoflush(1);
    return $s;
}

# Waits up to $timeout s for the process to exit; true if it did.
sub wait_exit {
    my ($self, $timeout) = @_;
    my $deadline = time + $timeout;
    while (time < $deadline) {
        return 1 unless $self->alive;
        sleep 0.02;
    }
    return !$self->alive;
}

sub _kill {
    my $self = shift;
    return unless $self->alive;
    kill 'KILL', $self->{pid};
    $self->wait_exit(5);
}

# Checks the log for sanitizer reports (one TAP assertion).
sub check_log {
    my ($self, $what) = @_;
    my $text = $self->log_text;
    my @found = grep { $text =~ /\Q$_\E/ } ('AddressSanitizer', 'LeakSanitizer',
        'runtime error');
    Test::More::ok(!@found, "$what: no sanitizer report in the server log")
      or Test::More::diag($text);
}

sub stop {
    my $self = shift;
    my $was_alive = $self->alive;
    Test::More::ok($was_alive, 'server was still running before SIGTERM')
      or Test::More::diag('exit status ' . ($self->{status} // '?') . "\n" . $self->log_text);
    kill 'TERM', $self->{pid} if $was_alive;
    my $exited = $self->wait_exit(10);
    Test::More::ok($exited, 'server exited within 10 s of SIGTERM')
      or Test::More::diag("threads still running:\n" . $self->_threads . "log:\n" . $self->log_text);
    if ($exited) {
        my $st = $self->{status};
        Test::More::is(($st & 127) ? "signal " . ($st & 127) : "exit " . ($st >> 8),
            'exit 0', 'server exit status after SIGTERM is 0');
    }
    else {
        $self->_kill;
    }
    $self->check_log('after stop');
}

# A file's whole text ('?' when it cannot be read).
sub slurp {
    my $path = shift;
    open(my $fh, '<', $path) or return '?';
    local $/;
    my $t = <$fh>;
    return $t // '';
}

# "name state wchan" of each thread of a live server, for diagnostics.
sub _threads {
    my $self = shift;
    my $out = '';
    for my $task (glob "/proc/$self->{pid}/task/*") {
        my ($comm, $stat, $wchan) = map { slurp("$task/$_") } qw(comm stat wchan);
        chomp $comm;
        my ($state) = $stat =~ /\)\s+(\S)/;
        $out .= "  $comm " . ($state // '?') . " $wchan\n";
    }
    # each thread's stack, where gdb is installed (as t/lib/mctest.py does)
    my ($gdb) = grep { -x } map { "$_/gdb" } split /:/, $ENV{PATH} // '';
    if ($gdb) {
        my $stacks = `timeout 60 $gdb -batch -nx -p $self->{pid} -ex 'thread apply all bt' </dev/null 2>&1`;
        $out .= substr($stacks // '', -12000);
    }
    return $out;
}

$SIG{PIPE} = 'IGNORE';

# A signal to the test script still runs END, so its servers are killed.
for my $sig (qw(INT TERM HUP)) {
    $SIG{$sig} = sub { exit 128 + 2 } unless defined $SIG{$sig} && ref $SIG{$sig};
}

END {
    my $status = $?;    # waitpid sets $?, which would become the script's own
    for my $srv (values %running) {
        kill 'KILL', $srv->{pid};
        waitpid($srv->{pid}, 0);
    }
    $? = $status;
}

sub mc_send {
    my ($s, $bytes) = @_;
    my $off = 0;
    my $sel = IO::Select->new($s);
    my $deadline = time + $DEFAULT_TIMEOUT * 2;
    while ($off < length $bytes) {
        die "mc_send: timed out\n" if time > $deadline;
        next unless $sel->can_write(0.5);
        my $n = syswrite($s, $bytes, length($bytes) - $off, $off);
        return 0 if !defined $n && ($!{EPIPE} || $!{ECONNRESET});    # peer closed
        die "mc_send: $!\n" unless defined $n;
        $off += $n;
    }
    return 1;
}

# Bytes read from a socket but not yet consumed live in the socket's glob hash.
sub _buf {
    my $s = shift;
    ${*$s}{mc_buf} //= '';
    return \${*$s}{mc_buf};
}

# Reads until $done->($buf) is true, EOF or the deadline; returns the bytes.
sub _read_until {
    my ($s, $timeout, $done) = @_;
    my $buf = _buf($s);
    my $sel = IO::Select->new($s);
    my $deadline = time + ($timeout // $DEFAULT_TIMEOUT);
    while (1) {
        my $len = $done->($$buf);
        return substr($$buf, 0, $len, '') if defined $len;
        my $left = $deadline - time;
        last if $left <= 0;
        # a TLS socket may hold decrypted bytes the descriptor no longer signals
        next unless _pending($s) || $sel->can_read($left < 0.5 ? $left : 0.5);
        my $n = sysread($s, my $chunk, 65536);
        last unless $n;    # EOF or reset
        $$buf .= $chunk;
    }
    my $all = $$buf;
    $$buf = '';
    return $all;
}

sub _pending {
    my $s = shift;
    return $s->can('pending') && $s->pending;
}

sub mc_line {
    my ($s, $timeout) = @_;
    return _read_until($s, $timeout, sub {
        my $i = index($_[0], "\n");
        return $i >= 0 ? $i + 1 : undef;
    });
}

sub mc_bytes {
    my ($s, $n, $timeout) = @_;
    return _read_until($s, $timeout, sub { length($_[0]) >= $n ? $n : undef });
}

sub mc_until {
    my ($s, $end, $timeout) = @_;
    return _read_until($s, $timeout, sub {
        my $i = index($_[0], $end);
        return $i >= 0 ? $i + length $end : undef;
    });
}

sub mc_is {
    my ($s, $request, $expected, $name) = @_;
    mc_send($s, $request) if defined $request && length $request;
    my $got = mc_bytes($s, length $expected);
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    return 1 if Test::More::is(_show($got), _show($expected), $name);
    # After a mismatch, drop whatever else arrives so the next check starts
    # in step with the server instead of failing on this one's leftovers.
    my $rest = _read_until($s, 0.3, sub { undef });
    Test::More::diag('then also received: ' . _show($rest)) if length $rest;
    return 0;
}

# Printable form of protocol bytes for diagnostics.
sub _show {
    my $t = shift;
    return undef unless defined $t;
    $t = substr($t, 0, 300) . '...(' . length($t) . ' bytes)' if length $t > 400;
    $t =~ s/\r/\\r/g;
    $t =~ s/\n/\\n/g;
    $t =~ s/([^\x20-\x7e])/sprintf('\\x%02x', ord $1)/ge;
    return $t;
}

sub mc_silent {
    my ($s, $wait) = @_;
    my $buf = _buf($s);
    return 0 if length $$buf;
    my $sel = IO::Select->new($s);
    return 1 unless _pending($s) || $sel->can_read($wait // 0.2);
    my $n = sysread($s, my $chunk, 65536);
    return 0 if !defined $n || $n == 0;    # EOF or error is not silence
    $$buf .= $chunk;
    return 0;
}

sub mc_eof {
    my ($s, $timeout) = @_;
    my $sel = IO::Select->new($s);
    my $deadline = time + ($timeout // $DEFAULT_TIMEOUT);
    ${ _buf($s) } = '';
    while (time < $deadline) {
        next unless $sel->can_read(0.2);
        my $n = sysread($s, my $chunk, 65536);
        return 1 if !defined $n || $n == 0;    # reset counts as closed
    }
    return 0;
}

sub mc_stats {
    my ($s, $group) = @_;
    mc_send($s, defined $group ? "stats $group\r\n" : "stats\r\n");
    my $text = mc_until($s, "END\r\n");
    my %st;
    for my $line (split /\r\n/, $text) {
        $st{$1} = $2 if $line =~ /^STAT (\S+) ?(.*)$/;
    }
    return \%st;
}

# Gets each key (flags 0 expected) one at a time; returns how many were
# missing and how many came back with another value than $value.
# mc_read_back($s, $n, $batch, $value_of): reads keys k0 .. k($n - 1) by
# text multi-gets of $batch keys and compares each value found with
# $value_of->($i) (flags 0); returns (values found, values wrong). Dies on
# a reply line it cannot parse.
sub mc_read_back {
    my ($s, $n, $batch, $value_of) = @_;
    my ($hits, $wrong) = (0, 0);
    for (my $i = 0; $i < $n; $i += $batch) {
        my $last = $i + $batch - 1 < $n - 1 ? $i + $batch - 1 : $n - 1;
        mc_send($s, 'get ' . join(' ', map {"k$_"} $i .. $last) . "\r\n");
        while (1) {
            my $line = mc_line($s, 30);
            last if $line eq "END\r\n";
            $line =~ /^VALUE k(\d+) 0 (\d+)\r\n\z/ or die "bad reply line: '$line'";
            my ($k, $len) = ($1, $2);
            my $data = mc_bytes($s, $len + 2, 30);
            $hits++;
            $wrong++ if $data ne $value_of->($k) . "\r\n";
        }
    }
    return ($hits, $wrong);
}

sub mc_count_values {
    my ($s, $value, @keys) = @_;
    my ($missing, $bad) = (0, 0);
    for my $key (@keys) {
        mc_send($s, "get $key\r\n");
        my $line = mc_line($s);
        if ($line eq "END\r\n") {
            $missing++;
            next;
        }
        my $len = length $value;
        my $body = $line =~ /^VALUE \S+ \d+ (\d+)\r\n\z/ ? mc_bytes($s, $1 + 2 + 5) : '';
        $bad++ unless $line eq "VALUE $key 0 $len\r\n" && $body eq "$value\r\nEND\r\n";
    }
    return ($missing, $bad);
}

sub mc_resync {
    my ($s, $timeout) = @_;
    mc_send($s, "version\r\n");
    my $deadline = time + ($timeout // $DEFAULT_TIMEOUT);
    for (1 .. 100) {
        my $left = $deadline - time;
        return 0 if $left <= 0;
        my $line = mc_line($s, $left);
        return 1 if $line =~ /^VERSION \S.*\r\n\z/;
        return 0 unless $line =~ /^(ERROR|CLIENT_ERROR [^\r\n]*)\r\n\z/;
    }
    return 0;
}

1;
