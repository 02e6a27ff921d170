#!/usr/bin/perl
# t/proto/auth.t: text-protocol authentication with -Y <file> (protocol.txt,
# "Authentication"): until a connection authenticates with a fake "set"
# carrying "username password", every command gets "CLIENT_ERROR ..."; after
# it, commands work; a wrong password is refused.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempfile);
use MCTest;

my ($fh, $file) = tempfile('mcauth-XXXXXX', TMPDIR => 1, UNLINK => 1);
print $fh "alice:secret\nbob:pw2\n";
close $fh;

my $srv = eval { start_server('-Y', $file) };
if (!ok($srv, 'the server starts with -Y <file>')) {
    diag($@);
    done_testing;
    exit;
}

my $s = $srv->connect;
mc_send($s, "version\r\n");
like(mc_line($s), qr/^CLIENT_ERROR [^\r\n]*\r\n\z/, 'version before authenticating is CLIENT_ERROR');
mc_send($s, "get a\r\n");
like(mc_line($s), qr/^CLIENT_ERROR [^\r\n]*\r\n\z/, 'get before authenticating is CLIENT_ERROR');
mc_is($s, "set anykey 0 0 12\r\nalice secret\r\n", "STORED\r\n", 'set with "alice secret" authenticates');
mc_is($s, "set a 0 0 1\r\nx\r\nget a\r\n", "STORED\r\nVALUE a 0 1\r\nx\r\nEND\r\n", 'after that, commands work');
mc_is($s, "get anykey\r\n", "END\r\n", 'the authentication set stored nothing');
close $s;

my $b = $srv->connect;
mc_is($b, "set k 1 2 7\r\nbob pw2\r\n", "STORED\r\n", 'a second user from the file authenticates (key, flags, exptime ignored)');
mc_is($b, "get a\r\n", "VALUE a 0 1\r\nx\r\nEND\r\n", 'and sees the data');
close $b;

my $w = $srv->connect;
mc_send($w, "set x 0 0 12\r\nalice wrong!\r\n");
like(mc_line($w), qr/^CLIENT_ERROR [^\r\n]*\r\n\z/, 'a wrong password is CLIENT_ERROR');
mc_send($w, "get a\r\n");
my $after = mc_line($w, 3);
ok($after eq '' || $after =~ /^CLIENT_ERROR /, 'the refused connection still cannot read data');
close $w;

my $u = $srv->connect;
mc_send($u, "set x 0 0 10\r\nnobody pw2\r\n");
like(mc_line($u), qr/^CLIENT_ERROR [^\r\n]*\r\n\z/, 'an unknown user is CLIENT_ERROR');
close $u;

$srv->stop;
done_testing;
