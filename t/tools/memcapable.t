#!/usr/bin/perl
# t/tools/memcapable.t: libmemcached's conformance checker (memccapable
# from libmemcached-tools) against $MC_SERVER: its binary-protocol tests
# (-b) and its text-protocol tests (-a), each on a fresh server. Every test
# it runs becomes one TAP assertion; it must end with "All tests passed".
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/../lib";
use MCTest;

plan skip_all => 'memccapable (libmemcached-tools) is not installed'
  unless grep { -x "$_/memccapable" } split /:/, $ENV{PATH};

for my $run ([ '-b', 'binary' ], [ '-a', 'ascii' ]) {
    my ($flag, $label) = @$run;
    my $srv = start_server();
    # -t: seconds per I/O operation; timeout(1) bounds the whole run
    open(my $fh, '-|', 'timeout', '60', 'memccapable', '-h', '127.0.0.1', '-p', $srv->port,
        '-t', '5', $flag) or die "cannot run memccapable: $!";
    my @lines = <$fh>;
    close $fh;
    my $status = $? >> 8;
    my $tests = 0;
    for my $line (@lines) {
        next unless $line =~ /^(\S.*?)\s+\[(\w+)\]\s*$/;
        my ($name, $result) = ($1, $2);
        $tests++;
        is($result, 'pass', "memccapable $flag: $name");
    }
    ok($tests >= 20, "memccapable $flag ran its $label tests ($tests)");
    ok((grep { /^All tests passed/ } @lines), "memccapable $flag: All tests passed")
      or diag(join '', @lines);
    is($status, 0, "memccapable $flag: exit status 0");
    $srv->stop;
}

done_testing();
