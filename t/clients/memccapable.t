#!/usr/bin/perl
# t/clients/memccapable.t: libmemcached's conformance tool "memccapable -a"
# (libmemcached-tools) against the server: every ascii test must pass.
use strict;
use warnings;
use Test::More;
use MCTest;

my $tool = '/usr/bin/memccapable';
plan skip_all => "$tool not installed (Debian: libmemcached-tools)" unless -x $tool;

my $srv = start_server('-m', '64');
my $port = $srv->port;
# -t: per-operation timeout; timeout(1) bounds the whole run.
my $out = `timeout 120 $tool -h 127.0.0.1 -p $port -t 10 -a 2>&1`;
my $status = $?;
is($status >> 8, 0, 'memccapable -a exits 0') or diag($out);

my %result;
for my $line (split /\n/, $out) {
    $result{$1} = $2 if $line =~ /^(ascii \S+(?: noreply)?)\s+\[(\w+)\]\s*$/;
}
ok(keys(%result) >= 20, 'memccapable ran its ascii tests (' . scalar(keys %result) . ')');
for my $name (sort keys %result) {
    is($result{$name}, 'pass', "memccapable: $name");
}
for my $name ('ascii set', 'ascii get', 'ascii gets', 'ascii mget', 'ascii cas', 'ascii incr', 'ascii decr',
    'ascii append', 'ascii prepend', 'ascii delete', 'ascii flush', 'ascii stat', 'ascii quit', 'ascii version')
{
    ok(exists $result{$name}, "memccapable ran '$name'");
}
like($out, qr/^All tests passed$/m, 'memccapable reports all tests passed');

$srv->stop;
done_testing;
