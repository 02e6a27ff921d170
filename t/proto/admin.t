#!/usr/bin/perl
# t/proto/admin.t: version, verbosity, quit, shutdown (refused without -A,
# honoured with -A), cache_memlimit, flush_all refused with -F, and unknown
# or wrongly cased commands.
use strict;
use warnings;
use Test::More;
use MCTest;

my $srv = start_server('-m', '64');
my $s = $srv->connect;

mc_send($s, "version\r\n");
like(mc_line($s), qr/^VERSION \d+\.\d+\.\d+\r\n\z/,
    'version answers VERSION <major>.<minor>.<patch>, the form version parsers accept');

mc_is($s, "verbosity 1\r\n", "OK\r\n", 'verbosity 1');
mc_is($s, "verbosity 0\r\n", "OK\r\n", 'verbosity 0');
mc_send($s, "verbosity 1 noreply\r\nverbosity 0 noreply\r\n");
ok(mc_silent($s, 0.3), 'verbosity noreply sends nothing');
mc_is($s, "verbosity\r\n", "ERROR\r\n", 'verbosity without a level is ERROR');

# cache_memlimit
mc_is($s, "cache_memlimit 100\r\n", "OK\r\n", 'cache_memlimit 100 (megabytes)');
is(mc_stats($s)->{limit_maxbytes}, 100 * 1024 * 1024, 'limit_maxbytes follows cache_memlimit');
mc_send($s, "cache_memlimit 80 noreply\r\n");
ok(mc_silent($s, 0.3), 'cache_memlimit noreply sends nothing');
is(mc_stats($s)->{limit_maxbytes}, 80 * 1024 * 1024, 'cache_memlimit noreply took effect');
mc_send($s, "cache_memlimit 1\r\n");
like(mc_line($s), qr/^MEMLIMIT_TOO_SMALL .*\r\n\z/, 'cache_memlimit below 8 MB is MEMLIMIT_TOO_SMALL');
is(mc_stats($s)->{limit_maxbytes}, 80 * 1024 * 1024, 'a refused cache_memlimit changes nothing');
mc_is($s, "cache_memlimit\r\n", "ERROR\r\n", 'cache_memlimit without an argument is ERROR');
mc_is($s, "cache_memlimit x\r\n", "ERROR\r\n", 'cache_memlimit with a non-number is ERROR');

# unknown and wrongly cased commands
mc_is($s, "bogus\r\n", "ERROR\r\n", 'unknown command is ERROR');
mc_is($s, "bogus with args\r\n", "ERROR\r\n", 'unknown command with arguments is ERROR');
mc_is($s, "GET a\r\n", "ERROR\r\n", 'commands are case-sensitive (GET)');
mc_is($s, "Set a 0 0 1\r\n", "ERROR\r\n", 'commands are case-sensitive (Set)');
mc_is($s, "\r\n", "ERROR\r\n", 'an empty line is ERROR');
mc_is($s, "stats bogus\r\n", "ERROR\r\n", 'an unknown stats group is ERROR');
mc_is($s, "set a 0 0 1\r\nx\r\nget a\r\n", "STORED\r\nVALUE a 0 1\r\nx\r\nEND\r\n",
    'the connection still works after those errors');

# shutdown without -A
mc_is($s, "shutdown\r\n", "ERROR: shutdown not enabled\r\n", 'shutdown without -A is refused');
mc_is($s, "get a\r\n", "VALUE a 0 1\r\nx\r\nEND\r\n", 'server keeps serving after a refused shutdown');

# quit
my $q = $srv->connect;
mc_is($q, "set q 0 0 1\r\nq\r\n", "STORED\r\n", 'set before quit');
mc_send($q, "quit\r\n");
ok(mc_eof($q, 3), 'quit closes the connection');
close $q;
$q = $srv->connect;
mc_send($q, "set q2 0 0 1\r\nq\r\nquit\r\nset q3 0 0 1\r\nq\r\n");
is(mc_until($q, "\r\n", 3), "STORED\r\n", 'commands before quit in the same packet are answered');
ok(mc_eof($q, 3), 'quit in a pipeline closes the connection');
close $q;
mc_is($s, "get q q2 q3\r\n", "VALUE q 0 1\r\nq\r\nVALUE q2 0 1\r\nq\r\nEND\r\n",
    'commands after quit in the same packet are not executed');

# SIGTERM while clients are connected, one of them in the middle of a value.
my $idle = $srv->connect;
my $half = $srv->connect;
mc_send($half, "set half 0 0 100\r\nonly some of it");
mc_is($idle, "version\r\n", "VERSION ", 'two more clients connected, one mid-value');
close $s;
$srv->stop;
close $idle;
close $half;

# -F disables flush_all
{
    my $f = start_server('-F');
    my $c = $f->connect;
    mc_is($c, "set foo 0 0 1\r\nx\r\n", "STORED\r\n", '-F: set');
    mc_is($c, "flush_all\r\n", "CLIENT_ERROR flush_all not allowed\r\n", '-F: flush_all is not allowed');
    mc_is($c, "flush_all 10\r\n", "CLIENT_ERROR flush_all not allowed\r\n", '-F: flush_all with a delay is not allowed');
    mc_is($c, "get foo\r\n", "VALUE foo 0 1\r\nx\r\nEND\r\n", '-F: the item is still there');
    close $c;
    $f->stop;
}

# shutdown with -A
my $srv2 = start_server('-A');
my $s2 = $srv2->connect;
mc_is($s2, "shutdown bogus\r\n", "CLIENT_ERROR invalid shutdown mode\r\n", 'shutdown with an unknown mode is refused');
ok($srv2->alive, 'server still runs after the refused shutdown');
mc_send($s2, "shutdown\r\n");
ok(mc_eof($s2, 5), 'shutdown with -A closes the connection');
ok($srv2->wait_exit(10), 'shutdown with -A stops the server');
is($srv2->exit_status // -1, 0, 'server exits with status 0 after shutdown');
$srv2->check_log('after shutdown');

my $srv3 = start_server('-A');
my $s3 = $srv3->connect;
mc_send($s3, "shutdown graceful\r\n");
ok(mc_eof($s3, 5), 'shutdown graceful closes the connection');
ok($srv3->wait_exit(10), 'shutdown graceful stops the server');
is($srv3->exit_status // -1, 0, 'server exits with status 0 after shutdown graceful');
$srv3->check_log('after shutdown graceful');

done_testing;
