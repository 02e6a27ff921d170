#!/usr/bin/perl
# t/tools/scripts_run.t: scripts/run's server start (README's first command).
# Started as root without -u, the server runs, as an unprivileged user, and
# serves; an explicit -u is passed through unchanged. MEMCACHED_RDMA_SERVER
# points scripts/run at $MC_SERVER, so no build happens here.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";
use IO::Socket::INET;
use POSIX ();
use Test::More;
use Time::HiRes qw(sleep time);
use MCTest;

plan skip_all => 'scripts/run as root: the tests are not running as root' if $> != 0;
my $run = "$FindBin::Bin/../../scripts/run";
my $bin = $ENV{MC_SERVER} || '/usr/bin/memcached';

# Starts scripts/run with extra arguments; returns (pid, port, socket) once
# the server answers, or (pid, port) with the socket undefined.
sub start {
    my @args = @_;
    my $port = free_port();
    my $pid = fork();
    die "fork: $!" unless defined $pid;
    if ($pid == 0) {
        $ENV{MEMCACHED_RDMA_SERVER} = $bin;
        open STDIN, '<', '/dev/null';
        open STDOUT, '>', '/dev/null';
        open STDERR, '>', '/dev/null';
        exec $run, '-p', $port, '-U', '0', @args or POSIX::_exit(127);
    }
    my $deadline = time + 10;
    while (time < $deadline) {
        my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Timeout => 1);
        return ($pid, $port, $s) if $s;
        last if waitpid($pid, POSIX::WNOHANG()) == $pid;
        sleep 0.05;
    }
    return ($pid, $port, undef);
}

sub user_of {
    my $pid = shift;
    open(my $fh, '<', "/proc/$pid/status") or return '';
    my ($uid) = map { /^Uid:\s+(\d+)/ ? $1 : () } <$fh>;
    return defined $uid ? (getpwuid($uid))[0] // $uid : '';
}

sub stop {
    my $pid = shift;
    kill 'TERM', $pid;
    waitpid($pid, 0);
}

my ($pid, $port, $s) = start();
ok($s, 'scripts/run as root without -u starts a server that accepts connections');
SKIP: {
    skip 'no server', 4 unless $s;
    my $want = getpwnam('memcache') ? 'memcache' : 'nobody';
    is(user_of($pid), $want, "... running as $want, not root");
    mc_is($s, "set k 0 0 1\r\nv\r\n", "STORED\r\n", '... which stores');
    mc_is($s, "get k\r\n", "VALUE k 0 1\r\nv\r\nEND\r\n", '... and serves');
    stop($pid);
    ok(!kill(0, $pid), '... and stops on SIGTERM');
}

($pid, $port, $s) = start('-u', 'root');
ok($s, 'scripts/run -u root: the given -u is used');
SKIP: {
    skip 'no server', 1 unless $s;
    is(user_of($pid), 'root', '... running as root, as asked');
    stop($pid);
}
done_testing();
