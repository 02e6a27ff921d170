#!/usr/bin/perl
# t/binary/concurrency.t: binary clients on several connections (served
# by several worker threads) change the same items at once: pipelined
# quiet increments add up exactly, appends are never lost, and the counters
# agree. Against $MC_SERVER (our server or Debian's memcached).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../lib";
use Test::More;
use POSIX qw(_exit);
use MCTest;
use MCBinary;

my $srv = start_server('-t', '4');
my ($clients, $batches, $per_batch) = (4, 10, 50);
{
    my $s = $srv->connect;
    bin_call($s, bin_req($OP{set}, key => 'counter', extras => ext_store(0, 0), value => '0'));
    bin_call($s, bin_req($OP{set}, key => 'log', extras => ext_store(0, 0), value => ''));
    close $s;
}
my $before = do { my $s = $srv->connect; my $st = bin_stats($s); close $s; $st };

my @pids;
for my $c (1 .. $clients) {
    my $pid = fork();
    die "fork: $!" unless defined $pid;
    if ($pid == 0) {
        my $ok = eval {
            my $s = $srv->connect;
            for my $b (1 .. $batches) {
                my $frames = '';
                $frames .= bin_req($OP{incrq}, key => 'counter', extras => ext_arith(1, 0, 0))
                  for 1 .. $per_batch;
                $frames .= bin_req($OP{appendq}, key => 'log', value => chr(64 + $c));
                mc_send($s, $frames . bin_req($OP{noop}, opaque => $b));
                my $r = bin_read($s, 10);
                die "batch $b: unexpected reply\n" unless $r && $r->{opaque} == $b
                  && $r->{opcode} == $OP{noop};
            }
            close $s;
            1;
        };
        _exit($ok ? 0 : 1);
    }
    push @pids, $pid;
}
my $children_ok = 1;
for my $pid (@pids) {
    waitpid($pid, 0);
    $children_ok = 0 if $?;
}
ok($children_ok, "$clients clients each sent $batches batches, every batch answered only by its NOOP");

my $s = $srv->connect;
my $r = bin_call($s, bin_req($OP{get}, key => 'counter'));
my $total = $clients * $batches * $per_batch;
like($r && $r->{value}, qr/^$total *\z/, "the counter is exactly $total");
$r = bin_call($s, bin_req($OP{get}, key => 'log'));
my %per;
$per{$_}++ for split //, ($r ? $r->{value} : '');
is_deeply(\%per, { map { (chr(64 + $_) => $batches) } 1 .. $clients },
    'every append from every client is in the value');
my $st = bin_stats($s);
is($st->{incr_hits} - $before->{incr_hits}, $total, 'incr_hits counts every increment');
is($st->{cmd_set} - $before->{cmd_set}, $clients * $batches, 'cmd_set counts every append');
close $s;
$srv->stop;
done_testing();
